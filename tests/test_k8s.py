"""The Kubernetes manifests (docker/k8s): valid for the API server, offline (kubernetes-validate, strict), and
saying what the pod needs: its probes on the gateway's real routes, a drain inside the grace period, the key from
a Secret file, only /acp from outside, one pod per person with selectors no other person's objects match, and
an environment the real Settings accept off loopback; Prometheus let in with a key of its own, node drains never
held, bounded scratch volumes, and an overlay whose patches find what they change by name.

The overlay is rendered by `kustomize build` (or `kubectl kustomize`, which embeds it); where neither is
installed, the base's files are validated as they stand and the rendered checks are skipped.
"""

from __future__ import annotations

import copy
import shutil
import subprocess
from pathlib import Path
from typing import Any

import kubernetes_validate  # type: ignore[import-untyped]
import pytest
import yaml  # type: ignore[import-untyped]

from openab_browser.core.settings import Settings
from openab_browser.gateway.server import check_transport

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


def container_env(overlay: dict[str, dict[str, Any]]) -> dict[str, str]:
    container = overlay["Deployment"]["spec"]["template"]["spec"]["containers"][0]
    return {item["name"]: item["value"] for item in container["env"]}


def test_prometheus_scrapes_with_a_key_of_its_own_from_the_secret(overlay: dict[str, dict[str, Any]]) -> None:
    pod = overlay["Deployment"]["spec"]["template"]["spec"]
    env = container_env(overlay)
    key_file, metrics_file = Path(env["OPENAB_ACP_AUTH_KEY_FILE"]), Path(env["OPENAB_METRICS_KEY_FILE"])
    # Both from the one Secret volume, under the names `kubectl create secret ... --from-literal=` gives them.
    assert key_file.parent == metrics_file.parent and (key_file.name, metrics_file.name) == ("key", "metrics-key")
    mount = next(m for m in pod["containers"][0]["volumeMounts"] if m["mountPath"] == str(metrics_file.parent))
    assert next(v for v in pod["volumes"] if v["name"] == mount["name"])["secret"]["secretName"] == "alice-openab-key"
    settings = Settings.from_env(env)
    assert settings.metrics_token_file == metrics_file and settings.token_file == key_file
    # The documented scrape uses that key, and the Service's example too.
    deploy = (K8S.parent.parent / "docs" / "deploy.md").read_text()
    assert "key: metrics-key" in deploy and "key: metrics-key" in (K8S / "base" / "service.yaml").read_text()
    assert "--from-literal=metrics-key=" in (K8S / "overlays" / "example" / "kustomization.yaml").read_text()


def test_the_policy_lets_in_the_ingress_controller_and_prometheus_only(overlay: dict[str, dict[str, Any]]) -> None:
    rules = overlay["NetworkPolicy"]["spec"]["ingress"]
    peers = [peer for rule in rules for peer in rule["from"]]
    # Namespaces only: kustomize's selector labels would be added to a podSelector and match no foreign pod.
    assert all(set(peer) == {"namespaceSelector"} for peer in peers)
    namespaces = {peer["namespaceSelector"]["matchLabels"]["kubernetes.io/metadata.name"] for peer in peers}
    assert namespaces == {"ingress-nginx", "monitoring"}
    assert [port["port"] for rule in rules for port in rule["ports"]] == [8080], "the port /metrics is served on"


def disruptions_allowed(budget: dict[str, Any], replicas: int, healthy: int) -> int:
    """What the disruption controller computes for a budget over `replicas` pods, `healthy` of them ready."""
    spec = budget["spec"]
    desired = replicas - int(spec["maxUnavailable"]) if "maxUnavailable" in spec else int(spec["minAvailable"])
    return max(0, healthy - desired)


def may_evict(budget: dict[str, Any], *, replicas: int, healthy: int, pod_ready: bool) -> bool:
    if not pod_ready and budget["spec"].get("unhealthyPodEvictionPolicy") == "AlwaysAllow":
        return True
    return disruptions_allowed(budget, replicas, healthy) > 0


def test_a_node_drain_is_never_held_forever(overlay: dict[str, dict[str, Any]]) -> None:
    budget = overlay["PodDisruptionBudget"]
    replicas = overlay["Deployment"]["spec"]["replicas"]
    # A ready pod: the drain evicts it, and it drains its calls inside the grace period (SIGTERM, as a delete).
    assert may_evict(budget, replicas=replicas, healthy=replicas, pod_ready=True)
    # A pod that never got ready (a crash loop): under the default policy it would hold the node forever.
    assert budget["spec"]["unhealthyPodEvictionPolicy"] == "AlwaysAllow"
    assert may_evict(budget, replicas=replicas, healthy=0, pod_ready=False)
    # The rule this checks can fail: the budget of 0 the base once had held both.
    held = copy.deepcopy(budget)
    held["spec"] = {"maxUnavailable": 0, "selector": budget["spec"]["selector"]}
    assert not may_evict(held, replicas=1, healthy=1, pod_ready=True)
    assert not may_evict(held, replicas=1, healthy=0, pod_ready=False)


def test_scratch_volumes_are_bounded_and_the_claim_is_not_walked_at_every_start(
    overlay: dict[str, dict[str, Any]],
) -> None:
    for pod in (overlay["Deployment"]["spec"]["template"]["spec"],
                yaml.safe_load((K8S / "base" / "deployment.yaml").read_text())["spec"]["template"]["spec"]):
        assert pod["securityContext"]["fsGroupChangePolicy"] == "OnRootMismatch"
        mounts = {m["mountPath"]: m["name"] for m in pod["containers"][0]["volumeMounts"]}
        volumes = {v["name"]: v for v in pod["volumes"]}
        assert "emptyDir" in volumes[mounts["/tmp"]]
        for volume in volumes.values():
            if "emptyDir" in volume:
                assert volume["emptyDir"].get("sizeLimit"), f"{volume['name']}: an emptyDir without a limit"
    base = yaml.safe_load((K8S / "base" / "deployment.yaml").read_text())["spec"]["template"]["spec"]
    assert {v["name"] for v in base["volumes"] if "emptyDir" in v} == {"home", "tmp"}


def render_with_base(tmp_path: Path, change: Any) -> subprocess.CompletedProcess[str]:
    """The example overlay rendered over a copy of the base that `change` edited, as an operator's later base."""
    tree = tmp_path / "k8s"
    shutil.copytree(K8S, tree)
    change(tree / "base")
    if not (shutil.which("kustomize") or shutil.which("kubectl")):
        pytest.skip("neither kustomize nor kubectl is installed")
    command = ["kustomize", "build"] if shutil.which("kustomize") else ["kubectl", "kustomize"]
    return subprocess.run([*command, str(tree / "overlays" / "example")], capture_output=True, text=True, timeout=60)


def test_the_overlay_patches_find_what_they_change_by_name_after_the_base_grows(tmp_path: Path) -> None:
    def grow(base: Path) -> None:
        # A new first variable and a new first volume, a Secret as the key is: the old positional patches
        # (env/3, volumes/0, volumes/1) then changed the drain timeout, mounted the person's key as the CA and
        # dropped the key's volume, and rendered without an error.
        path = base / "deployment.yaml"
        deployment = yaml.safe_load(path.read_text())
        pod = deployment["spec"]["template"]["spec"]
        container = pod["containers"][0]
        container["env"].insert(0, {"name": "SSL_CERT_FILE", "value": "/etc/openab/ca/ca.pem"})
        container["volumeMounts"].insert(0, {"name": "ca", "mountPath": "/etc/openab/ca", "readOnly": True})
        pod["volumes"].insert(0, {"name": "ca", "secret": {"secretName": "corp-ca"}})
        path.write_text(yaml.safe_dump(deployment, sort_keys=False))

    rendered = render_with_base(tmp_path, grow)
    assert rendered.returncode == 0, rendered.stderr
    docs = by_kind([doc for doc in yaml.safe_load_all(rendered.stdout) if doc])
    pod = docs["Deployment"]["spec"]["template"]["spec"]
    env = container_env(docs)
    assert env["OPENAB_BEHIND_PROXY"] == "10.244.0.0/16" and env["OPENAB_DRAIN_TIMEOUT"] == "10"
    assert env["SSL_CERT_FILE"] == "/etc/openab/ca/ca.pem" and env["OPENAB_AGENT"] == "claude,codex"
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["ca"] == {"name": "ca", "secret": {"secretName": "corp-ca"}}
    assert volumes["key"]["secret"] == {"secretName": "alice-openab-key", "defaultMode": 0o400}
    assert volumes["home"] == {"name": "home", "persistentVolumeClaim": {"claimName": "alice-openab-home"}}


def test_an_ingress_patch_whose_position_no_longer_holds_its_rule_stops_the_render(tmp_path: Path) -> None:
    def reorder(base: Path) -> None:
        path = base / "ingress.yaml"
        ingress = yaml.safe_load(path.read_text())
        rules = ingress["spec"]["rules"]
        rules.insert(0, {**copy.deepcopy(rules[0]), "host": "status.example.com"})
        path.write_text(yaml.safe_dump(ingress, sort_keys=False))

    rendered = render_with_base(tmp_path, reorder)
    assert rendered.returncode != 0 and "test" in rendered.stderr.lower(), rendered.stdout[-2000:]
