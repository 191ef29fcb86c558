# The service and the load test as static binaries on empty images.
# With a registry: docker compose builds these targets. Without one (air-gapped
# hosts, blocked registries): deploy/offline/build-images.sh builds the same
# binaries with the local Go toolchain and uses deploy/offline/Dockerfile.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
COPY cmd ./cmd
COPY internal ./internal
COPY loadtest ./loadtest
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/inventory ./cmd/inventory && \
    CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/loadtest ./loadtest

FROM scratch AS inventory
COPY --from=build /out/inventory /inventory
USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["/inventory"]

FROM scratch AS loadtest
COPY --from=build /out/loadtest /loadtest
USER 65532:65532
ENTRYPOINT ["/loadtest"]
