#!/bin/sh
# The agent CLIs of the image, chosen at build time: AGENTS="claude codex" (docker build --build-arg AGENTS=...).
#
#   install-agents.sh --plan        print the npm packages AGENTS means, one per line, and nothing else
#   install-agents.sh PREFIX        install them under PREFIX (bin/ holds the commands), with the node they run
#                                   on copied into PREFIX/bin; with no npm agent named, PREFIX stays empty
#
# The versions are the ones the test suite drives (tests/agents/package.json): an upgrade is a change to both,
# tested. builtin needs nothing. cursor, kiro and goose ship their own installers, not npm packages: add them in
# a derived image (docs/deploy.md).
set -euf  # -f: no globbing of what AGENTS holds

packages_for() {
    case "$1" in
        builtin) ;;
        claude) echo "@agentclientprotocol/claude-agent-acp@0.101.0 @anthropic-ai/claude-code@2.1.332" ;;
        codex) echo "@zed-industries/codex-acp@0.16.0" ;;
        gemini) echo "@google/gemini-cli@0.61.0" ;;
        opencode) echo "opencode-ai@1.18.33" ;;
        copilot) echo "@github/copilot@1.0.102" ;;
        cursor|kiro|goose)
            echo "install-agents.sh: $1 is not an npm package; install it in a derived image (docs/deploy.md)" >&2
            return 2 ;;
        *)
            echo "install-agents.sh: unknown agent '$1' in AGENTS; choose from builtin claude codex gemini opencode copilot" >&2
            return 2 ;;
    esac
}

plan() {
    # Words only: AGENTS comes from a build argument, and nothing of it may reach a shell or npm as anything else.
    for agent in $(echo "${AGENTS:-}" | tr ',' ' '); do
        case "$agent" in
            *[!a-z]*) echo "install-agents.sh: '$agent' in AGENTS is not an agent's name" >&2; return 2 ;;
        esac
        packages_for "$agent" || return 2
    done
}

wanted=$(plan) || exit 2
if [ "${1:-}" = "--plan" ]; then
    for package in $wanted; do echo "$package"; done
    exit 0
fi
prefix=${1:?usage: install-agents.sh --plan | PREFIX}
mkdir -p "$prefix/bin"
if [ -z "$wanted" ]; then
    echo "install-agents.sh: no npm agent in AGENTS='${AGENTS:-}': no Node in the image"
    exit 0
fi
# shellcheck disable=SC2086  # one word per package
npm install --global --prefix "$prefix" --no-audit --no-fund --omit=dev $wanted
cp "$(command -v node)" "$prefix/bin/node"
