# syntax=docker/dockerfile:1
#
# AnyHook's container image: the static anyhook binary on distroless/static
# (CA certificates and time zones, no shell), running as the non-root user
# 65532. Build it from the repository root, stamping the version:
#
#   docker build -t anyhook:v1.2.0 --build-arg VERSION=v1.2.0 \
#       --build-arg COMMIT=$(git rev-parse HEAD) \
#       --build-arg DATE=$(git show -s --format=%cI HEAD) .
#
# It runs `anyhook serve` with the config at /etc/anyhook/anyhook.yaml (mount
# yours there, or set ANYHOOK_CONFIG) and keeps the SQLite database and the
# log signing key in the volume /var/lib/anyhook. docs/deploy.md has the
# whole recipe; deploy/dockerfile_test.go checks this file.

ARG GO_VERSION=1.26.8

FROM --platform=$BUILDPLATFORM golang:${GO_VERSION}-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
ARG TARGETOS TARGETARCH
ARG VERSION=dev
ARG COMMIT=""
ARG DATE=""
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS="$TARGETOS" GOARCH="$TARGETARCH" go build -trimpath -buildvcs=false \
        -ldflags "-s -w -X github.com/anyhook/anyhook/internal/buildinfo.version=${VERSION} -X github.com/anyhook/anyhook/internal/buildinfo.commit=${COMMIT} -X github.com/anyhook/anyhook/internal/buildinfo.date=${DATE}" \
        -o /out/usr/local/bin/anyhook ./cmd/anyhook && \
    mkdir -p /out/usr/share/doc/anyhook /out/var/lib/anyhook && \
    GOOS="$TARGETOS" GOARCH="$TARGETARCH" ./scripts/licenses.sh /out/usr/share/doc/anyhook/THIRD_PARTY_LICENSES && \
    cp LICENSE NOTICE /out/usr/share/doc/anyhook/

FROM gcr.io/distroless/static-debian12:nonroot
ARG VERSION=dev
LABEL org.opencontainers.image.title="anyhook" \
      org.opencontainers.image.description="AnyHook, a self-hosted webhook gateway" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${VERSION}"
COPY --from=build /out/usr/ /usr/
COPY --from=build --chown=65532:65532 /out/var/lib/anyhook/ /var/lib/anyhook/
ENV ANYHOOK_CONFIG=/etc/anyhook/anyhook.yaml
USER 65532:65532
WORKDIR /var/lib/anyhook
VOLUME ["/var/lib/anyhook"]
EXPOSE 8080
# The image has no shell or curl: the binary asks its own /healthz, at the
# config's listen address.
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
    CMD ["/usr/local/bin/anyhook", "healthcheck"]
# serve exits 0 on SIGTERM after draining (give it delivery.shutdown + ~20s:
# docker stop --time 40, stop_grace_period, terminationGracePeriodSeconds).
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/local/bin/anyhook"]
CMD ["serve"]
