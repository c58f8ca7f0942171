# syntax=docker/dockerfile:1
#
# d1bridge container image: a static binary on distroless, running as nonroot.
#
#   docker build --build-arg VERSION=$(git describe --always --dirty) -t d1bridge .
#   docker run -p 8080:8080 -v d1bridge-data:/data \
#     -e D1BRIDGE_NODE_BASEURL=https://mn.example.org/d1 d1bridge
#
# Set D1BRIDGE_NODE_BASEURL to the public URL: without it the node derives its
# baseURL from the listen address (0.0.0.0:8080), which clients cannot reach.

ARG GO_VERSION=1.26

# --- build -------------------------------------------------------------------
FROM golang:${GO_VERSION}-bookworm AS build
WORKDIR /src
# Modules first, so that source edits do not refetch them.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
ARG VERSION=dev
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=linux go build -trimpath \
      -ldflags "-s -w -X main.version=${VERSION}" \
      -o /out/d1bridge ./cmd/d1bridge \
 && mkdir -p /out/data

# --- run ---------------------------------------------------------------------
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/d1bridge /usr/local/bin/d1bridge
# The data directory (object bytes and the embedded catalog), owned by nonroot.
COPY --from=build --chown=65532:65532 /out/data /data
ENV D1BRIDGE_LISTEN=0.0.0.0:8080 \
    D1BRIDGE_DATADIR=/data
USER 65532:65532
EXPOSE 8080
VOLUME ["/data"]
ENTRYPOINT ["/usr/local/bin/d1bridge"]
