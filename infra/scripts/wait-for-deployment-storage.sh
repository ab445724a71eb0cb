#!/bin/sh
# azd postprovision hook (azure.yaml): waits until the blob service honours the role assignments this
# provision created, so that the first `azd deploy` of `azd up` does not fail with 403
# (Azure/azure-dev#8026). The platform writes the package with the app's identity, which this script
# cannot act as; it waits instead until the signed-in Azure CLI identity can list the deployment
# container through its own read role, which the template creates after the app's. See
# infra/README.md, "The first deployment".
#
# Reads the azd environment: STORAGE_ACCOUNT_NAME, DEPLOYMENT_CONTAINER_NAME (outputs of
# infra/main.bicep), DEPLOYMENT_STORAGE_WAIT_SECONDS (default 600; 0 skips the wait) and
# DEPLOYMENT_STORAGE_POLL_SECONDS (default 10).
set -u

say() { printf 'wait-for-deployment-storage: %s\n' "$*"; }
fail() {
  say "$*" >&2
  exit 1
}
whole_number() {
  case "$2" in
    '' | *[!0-9]*) fail "$1 must be a whole number of seconds, not '$(printf '%s' "$2" | cut -c 1-40)'" ;;
  esac
}

timeout_seconds="${DEPLOYMENT_STORAGE_WAIT_SECONDS:-600}"
poll_seconds="${DEPLOYMENT_STORAGE_POLL_SECONDS:-10}"
whole_number DEPLOYMENT_STORAGE_WAIT_SECONDS "$timeout_seconds"
whole_number DEPLOYMENT_STORAGE_POLL_SECONDS "$poll_seconds"
account="${STORAGE_ACCOUNT_NAME:-}"
container="${DEPLOYMENT_CONTAINER_NAME:-}"

if [ "$timeout_seconds" -eq 0 ]; then
  say "skipped: DEPLOYMENT_STORAGE_WAIT_SECONDS is 0."
  exit 0
fi
if [ -z "$account" ] || [ -z "$container" ]; then
  fail "STORAGE_ACCOUNT_NAME and DEPLOYMENT_CONTAINER_NAME are not set; azd sets them from the outputs of infra/main.bicep when it runs this hook after provisioning."
fi
if ! command -v az >/dev/null 2>&1; then
  say "skipped: no Azure CLI (az) on PATH to check the deployment container with. If the deploy fails with 403 (role assignments still propagating), run 'azd deploy' again in a minute."
  exit 0
fi
if ! az account show --output none >/dev/null 2>&1; then
  say "skipped: the Azure CLI is not signed in ('az login' as the account azd uses). If the deploy fails with 403 (role assignments still propagating), run 'azd deploy' again in a minute."
  exit 0
fi

say "waiting up to ${timeout_seconds} s until container '$container' of storage account '$account' answers with Entra ID (role assignments propagating)"
started=$(date +%s)
attempt=0
while :; do
  attempt=$((attempt + 1))
  if reply=$(az storage blob list --auth-mode login --account-name "$account" --container-name "$container" \
    --num-results 1 --only-show-errors --output none 2>&1); then
    say "ready after $(($(date +%s) - started)) s (attempt $attempt)."
    exit 0
  fi
  # First non-blank line of the CLI's error, bounded.
  reason=$(printf '%s\n' "$reply" | sed -n '/[^[:space:]]/{p;q;}' | cut -c 1-200)
  elapsed=$(($(date +%s) - started))
  if [ $((elapsed + poll_seconds)) -gt "$timeout_seconds" ]; then
    fail "container '$container' still refuses the signed-in identity after ${elapsed} s (${attempt} attempts): ${reason:-no error text}
Either the role assignments need longer (run 'azd deploy' in a few minutes, or raise DEPLOYMENT_STORAGE_WAIT_SECONDS), or the Azure CLI is signed in as another identity than azd (the read role is granted to AZURE_PRINCIPAL_ID, the one azd provisions as), or public network access is disabled. Set DEPLOYMENT_STORAGE_WAIT_SECONDS=0 to skip this check."
  fi
  say "not yet after ${elapsed} s (attempt $attempt): ${reason:-no error text}; next try in ${poll_seconds} s"
  sleep "$poll_seconds"
done
