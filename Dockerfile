# One image, every binary: the manager (Deployment) and the node agent (DaemonSet) run from it
# with different entrypoints (command: ["/agent"] in the DaemonSet), and the agent's init
# container copies the CNI plugin /aether-cni from it onto each node (/agent install-cni), and the
# pod webhook runs /aether-identity in the identity containers it injects into mesh pods, and the
# CSI node plugin's DaemonSet (config/csi) runs /aether-csi-node.
# The same content as make images' operator image (hack/image, its list operatorBinaries): a binary
# added there is added here too, in the builder's go build lines and the final COPY
# (hack/image's TestDockerfileBuildsTheSameImage compares the two).
ARG GO_IMAGE=golang:1.26
FROM ${GO_IMAGE} AS builder
ARG TARGETOS
ARG TARGETARCH
# What --version prints (internal/version); make docker-build passes git's.
ARG VERSION=unknown
ARG COMMIT=unknown
WORKDIR /workspace
# Modules first, so a source change does not re-download them.
COPY go.mod go.sum ./
RUN go mod download
COPY api/ api/
COPY cmd/ cmd/
COPY internal/ internal/
ENV CGO_ENABLED=0 GOOS=${TARGETOS:-linux} GOARCH=${TARGETARCH}
RUN ldflags="-s -w -X github.com/aether-mesh/aether-operator/internal/version.version=${VERSION} -X github.com/aether-mesh/aether-operator/internal/version.commit=${COMMIT}" && \
    go build -trimpath -ldflags="$ldflags" -o /out/manager ./cmd/manager && \
    go build -trimpath -ldflags="$ldflags" -o /out/agent ./cmd/agent && \
    go build -trimpath -ldflags="$ldflags" -o /out/aether-cni ./cmd/cni && \
    go build -trimpath -ldflags="$ldflags" -o /out/aether-identity ./cmd/identity && \
    go build -trimpath -ldflags="$ldflags" -o /out/aether-csi-node ./cmd/csi-node

# Nothing but the static binaries, the CA certificates (the builder's: Debian's ca-certificates
# package, as make images takes the build machine's) and the nonroot user 65532.
FROM scratch
ARG VERSION=unknown
ARG COMMIT=unknown
COPY --from=builder /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/
COPY --from=builder /out/manager /out/agent /out/aether-cni /out/aether-identity /out/aether-csi-node /
LABEL org.opencontainers.image.title=aether-operator \
      org.opencontainers.image.version=${VERSION} \
      org.opencontainers.image.revision=${COMMIT} \
      org.opencontainers.image.licenses=Apache-2.0
USER 65532:65532
ENTRYPOINT ["/manager"]
