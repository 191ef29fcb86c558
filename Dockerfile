# The service, the lab and the load test as static binaries on empty images.
# With a registry: docker compose builds these targets. Without one (air-gapped
# hosts, blocked registries): deploy/offline/build-images.sh builds the same
# binaries with the local Go toolchain and uses deploy/offline/Dockerfile.
# Pinned by digest like every image here (the digest is what is pulled; the
# tag says what it is): the official golang:1.26.8 image index (Debian trixie,
# every platform), as docker-library/repo-info records it at commit
# e243c7edb883107b26904e1bfd094b120b43b9a8 (repos/golang/remote/1.26.8.md).
FROM golang:1.26.8@sha256:ec0383e177f24920f5498de7d96d1cd81ada095b430dda72f8b863b99a485ff6 AS build
WORKDIR /src
COPY go.mod go.sum ./
COPY cmd ./cmd
COPY internal ./internal
COPY loadtest ./loadtest
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/inventory ./cmd/inventory && \
    CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/lab ./cmd/lab && \
    CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/loadtest ./loadtest

FROM scratch AS inventory
COPY --from=build /out/inventory /inventory
USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["/inventory"]

FROM scratch AS lab
COPY --from=build /out/lab /lab
USER 65532:65532
EXPOSE 8070
ENTRYPOINT ["/lab"]

FROM scratch AS loadtest
COPY --from=build /out/loadtest /loadtest
USER 65532:65532
ENTRYPOINT ["/loadtest"]
