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

# The zk and db locks' servers: Debian bookworm's ZooKeeper and MariaDB, the
# packages the local cluster and the offline images run, on the official
# debian image, pinned by digest: the debian:bookworm-20260824-slim index as
# docker-library/repo-info records it at commit
# cae117d8c88cf4f36d2e284cb10fc1a8851f18bc
# (repos/debian/remote/bookworm-20260824-slim.md). The Compose file mounts
# each one's start script (deploy/zookeeper.sh, deploy/mariadb.sh).
FROM debian:bookworm-20260824-slim@sha256:88200866dfff7ea7f5cbcb6ec7c8a701889efe6fe859fe64d6990e4b07ea4171 AS servers
# The JRE's packages write a manual page link into a folder slim images lack.
RUN mkdir -p /usr/share/man/man1 && apt-get update && \
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      libzookeeper-java default-jre-headless mariadb-server-core mariadb-client-core && \
    rm -rf /var/lib/apt/lists/*

FROM servers AS zookeeper
USER 65532:65532
EXPOSE 2181 2888 3888
CMD ["bash", "/zookeeper.sh"]

FROM servers AS mariadb
USER 65532:65532
EXPOSE 3306
CMD ["bash", "/mariadb.sh"]
