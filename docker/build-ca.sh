#!/bin/sh
# build-ca.sh COMMAND [ARG...]: run one build step's COMMAND trusting, besides the image's own CAs, the PEM
# bundle given as the build secret "ca" (an egress that inspects TLS re-signs pypi.org, npm and the Debian mirror
# with its own CA):
#
#   docker build --secret id=ca,src=corp-ca.pem -f docker/Dockerfile .
#   buildah bud --format docker --secret id=ca,src=corp-ca.pem -f docker/Dockerfile .
#
# pip, npm and apt get it through their own variables (PIP_CERT, NODE_EXTRA_CA_CERTS, Acquire::https::CaInfo);
# the bundle is made in a temporary folder and removed before the step ends, so no layer keeps it and the running
# image trusts only its own CAs (give the pod its CA at run time: docs/runtime.md). With no secret given the
# command runs as it is.
set -eu
extra=/run/secrets/ca
if [ ! -s "$extra" ]; then
    exec "$@"
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
bundle="$work/ca.pem"
# The image's own bundle first, when it has one (Node's image has none: node carries its own roots).
if [ -r /etc/ssl/certs/ca-certificates.crt ]; then
    cat /etc/ssl/certs/ca-certificates.crt >"$bundle"
fi
cat "$extra" >>"$bundle"
# apt fetches as its sandbox user, which must read the bundle: a CA certificate is public, the folder is not kept.
chmod 0755 "$work"
chmod 0644 "$bundle"
printf 'Acquire::https::CaInfo "%s";\n' "$bundle" >"$work/apt.conf"
PIP_CERT="$bundle" REQUESTS_CA_BUNDLE="$bundle" SSL_CERT_FILE="$bundle" NODE_EXTRA_CA_CERTS="$bundle" \
    APT_CONFIG="$work/apt.conf" "$@"
