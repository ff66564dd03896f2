"""The Kubernetes manifests (docker/k8s): valid for the API server, offline (kubernetes-validate, strict), and
saying what the pod needs: its probes on the gateway's real routes, a drain inside the grace period, the key from
a Secret file, only /acp from outside, one pod per person with selectors no other person's objects match, and
an environment the real Settings accept off loopback.

The overlay is rendered by `kustomize build` (or `kubectl kustomize`, which embeds it); where neither is
installed, the base's files are validated as they stand and the rendered checks are skipped.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import kubernetes_validate  # type: ignore[import-untyped]
import pytest
import yaml  # type: ignore[import-untyped]

from openab.core.settings import Settings
from openab.gateway.server import check_transport

K8S = Path(__file__).resolve().parent.parent / "docker" / "k8s"
KUBERNETES_VERSION = "1.30.0"  # the oldest release still supported upstream when this was written
KINDS = {"Deployment", "Service", "Ingress", "PodDisruptionBudget", "NetworkPolicy"}


def kustomize(folder: Path) -> list[dict[str, Any]]:
    if shutil.which("kustomize"):
        command = ["kustomize", "build", str(folder)]
    elif shutil.which("kubectl"):
        command = ["kubectl", "kustomize", str(folder)]
    else:
        pytest.skip("neither kustomize nor kubectl is installed: the base's files are validated on their own")
    rendered = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert rendered.returncode == 0, rendered.stderr
    return [doc for doc in yaml.safe_load_all(rendered.stdout) if doc]


def validate(doc: dict[str, Any]) -> None:
    kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)


def by_kind(docs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    kinds: dict[str, dict[str, Any]] = {}
    for doc in docs:
        assert doc["kind"] not in kinds, f"two {doc['kind']}s: one person's pod has one of each"
        kinds[doc["kind"]] = doc
    return kinds


def test_every_base_manifest_is_valid_for_the_api_server_as_it_stands() -> None:
    base = yaml.safe_load((K8S / "base" / "kustomization.yaml").read_text())
    kinds = set()
    for name in base["resources"]:
        for doc in yaml.safe_load_all((K8S / "base" / name).read_text()):
            validate(doc)
            kinds.add(doc["kind"])
    assert kinds == KINDS


def test_a_manifest_the_api_server_would_refuse_is_caught() -> None:
    # The validation can fail: a misspelt field (strict) and a wrong type are both refused.
    deployment = yaml.safe_load((K8S / "base" / "deployment.yaml").read_text())
    deployment["spec"]["template"]["spec"]["terminationGracePeriod"] = 45
    with pytest.raises(kubernetes_validate.ValidationError):
        validate(deployment)
    service = yaml.safe_load((K8S / "base" / "service.yaml").read_text())
    service["spec"]["ports"][0]["port"] = "eighty"
    with pytest.raises(kubernetes_validate.ValidationError):
        validate(service)


@pytest.fixture(scope="module")
def overlay() -> dict[str, dict[str, Any]]:
    docs = kustomize(K8S / "overlays" / "example")
    for doc in docs:
        validate(doc)
    return by_kind(docs)


def pod_labels(overlay: dict[str, dict[str, Any]]) -> dict[str, str]:
    labels: dict[str, str] = overlay["Deployment"]["spec"]["template"]["metadata"]["labels"]
    return labels


def test_the_pod_runs_non_root_with_probes_on_the_gateways_routes_and_a_grace_longer_than_the_drain(
    overlay: dict[str, dict[str, Any]],
) -> None:
    spec = overlay["Deployment"]["spec"]
    assert spec["replicas"] == 1 and spec["strategy"]["type"] == "Recreate", "sessions live in one pod's memory"
    pod = spec["template"]["spec"]
    container = pod["containers"][0]
    env = {item["name"]: item["value"] for item in container["env"]}
    # The drain, then a turn's cancel grace, then every session's eviction, all before the kubelet's SIGKILL.
    assert pod["terminationGracePeriodSeconds"] >= float(env["OPENAB_DRAIN_TIMEOUT"]) + Settings().cancel_grace + 20
    assert pod["securityContext"]["runAsNonRoot"] and pod["securityContext"]["runAsUser"] == 10001
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    # A read-only root, so everything openab and the agent CLIs write has a volume: HOME (state, the CLIs' own
    # config and sessions, on the person's claim) and /tmp.
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"] if not m.get("readOnly")}
    assert set(mounts) == {"/home/agent", "/tmp"}
    home = next(v for v in pod["volumes"] if v["name"] == mounts["/home/agent"])
    claims = {doc_name for doc_name in [overlay["PersistentVolumeClaim"]["metadata"]["name"]]}
    assert home["persistentVolumeClaim"]["claimName"] in claims
    port_name = container["readinessProbe"]["httpGet"]["port"]
    assert [p["containerPort"] for p in container["ports"] if p["name"] == port_name] == [int(env["OPENAB_PORT"])]


def test_the_key_comes_from_the_persons_secret_as_a_file_never_as_a_value(overlay: dict[str, dict[str, Any]]) -> None:
    pod = overlay["Deployment"]["spec"]["template"]["spec"]
    container = pod["containers"][0]
    names = {item["name"] for item in container["env"]}
    assert "OPENAB_ACP_AUTH_KEY" not in names
    key_file = next(item["value"] for item in container["env"] if item["name"] == "OPENAB_ACP_AUTH_KEY_FILE")
    mount = next(m for m in container["volumeMounts"] if key_file.startswith(m["mountPath"] + "/"))
    volume = next(v for v in pod["volumes"] if v["name"] == mount["name"])
    assert volume["secret"]["secretName"] == "alice-openab-key" and volume["secret"]["defaultMode"] == 0o400
    assert mount["readOnly"] is True


def test_the_pods_environment_is_one_the_real_settings_accept_off_loopback(
    overlay: dict[str, dict[str, Any]],
) -> None:
    env = {item["name"]: item["value"] for item in overlay["Deployment"]["spec"]["template"]["spec"]["containers"][0]
           ["env"] if item["name"] != "OPENAB_ACP_AUTH_KEY_FILE"}
    settings = Settings.from_env(env)
    assert settings.host == "0.0.0.0" and settings.behind_proxy == ["10.244.0.0/16"]
    check_transport(settings)  # would refuse a clear-text bind with no proxy named
    assert settings.agent == ["claude", "codex"]


def test_only_acp_leaves_the_cluster_through_an_ingress_that_keeps_idle_sockets(
    overlay: dict[str, dict[str, Any]],
) -> None:
    ingress = overlay["Ingress"]
    rules = ingress["spec"]["rules"]
    assert [rule["host"] for rule in rules] == ["alice.openab.example.com"]
    paths = rules[0]["http"]["paths"]
    assert [(p["path"], p["pathType"]) for p in paths] == [("/acp", "Exact")]
    assert paths[0]["backend"]["service"]["name"] == overlay["Service"]["metadata"]["name"]
    assert ingress["spec"]["tls"][0]["hosts"] == ["alice.openab.example.com"]
    annotations = ingress["metadata"]["annotations"]
    # Longer than any quiet stretch of a live socket: the pod pings every 15 s at most, a turn may think for minutes.
    assert int(annotations["nginx.ingress.kubernetes.io/proxy-read-timeout"]) >= 3600
    assert int(annotations["nginx.ingress.kubernetes.io/proxy-send-timeout"]) >= 3600
    # The pod's cap per address sees only the ingress: the ingress caps each client, above a panel's redial.
    assert 2 <= int(annotations["nginx.ingress.kubernetes.io/limit-connections"]) <= 64
    policy = overlay["NetworkPolicy"]["spec"]
    assert policy["podSelector"]["matchLabels"].items() <= pod_labels(overlay).items()
    assert [port["port"] for rule in policy["ingress"] for port in rule["ports"]] == [8080]


def test_no_object_of_one_person_selects_another_persons_pod(overlay: dict[str, dict[str, Any]]) -> None:
    labels = pod_labels(overlay)
    assert labels.get("openab.dev/for") == "alice"
    selectors = [
        overlay["Service"]["spec"]["selector"],
        overlay["Deployment"]["spec"]["selector"]["matchLabels"],
        overlay["PodDisruptionBudget"]["spec"]["selector"]["matchLabels"],
        overlay["NetworkPolicy"]["spec"]["podSelector"]["matchLabels"],
    ]
    for selector in selectors:
        assert selector.get("openab.dev/for") == "alice" and selector.items() <= labels.items()
    # Bob's copy of the overlay (the documented way to add a person) selects only Bob's.
    bob = {**labels, "openab.dev/for": "bob"}
    assert not any(selector.items() <= bob.items() for selector in selectors)
    assert overlay["PodDisruptionBudget"]["spec"]["maxUnavailable"] == 0
