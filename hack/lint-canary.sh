#!/usr/bin/env bash
# Negative control for the import rules in .golangci.yml: plants a file that breaks each depguard
# rule and fails unless golangci-lint reports every one. A rule that silently stopped matching
# (a renamed path, a typo in a glob) would otherwise pass forever.
set -euo pipefail
lint=${1:?usage: lint-canary.sh path/to/golangci-lint}
cd "$(dirname "$0")/.."

canaries=(internal/portspec/zz_canary.go internal/resolve/zz_canary.go api/v1alpha1/zz_canary.go internal/registration/zz_canary.go)
trap 'rm -f "${canaries[@]}"' EXIT
cat > internal/portspec/zz_canary.go <<'GO'
package portspec

import _ "k8s.io/apimachinery/pkg/util/sets"
GO
cat > internal/resolve/zz_canary.go <<'GO'
package resolve

import _ "sigs.k8s.io/controller-runtime/pkg/client"
GO
cat > api/v1alpha1/zz_canary.go <<'GO'
package v1alpha1

import _ "github.com/aether-mesh/aether-operator/internal/portspec"
GO
cat > internal/registration/zz_canary.go <<'GO'
package registration

import _ "sigs.k8s.io/controller-runtime/pkg/client"
GO

out=$("$lint" run --enable-only depguard ./internal/portspec/ ./internal/resolve/ ./internal/registration/ ./api/... 2>&1 || true)
status=0
for f in "${canaries[@]}"; do
  if ! grep -q "^$f:.*(depguard)" <<<"$out"; then
    echo "lint canary: depguard did not flag $f; the import rules in .golangci.yml no longer match" >&2
    status=1
  fi
done
[ $status -eq 0 ] && echo "lint canary: depguard flags all ${#canaries[@]} planted violations"
exit $status
