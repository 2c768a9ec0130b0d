"""The opsd Helm chart, rendered for real by Helm's Go SDK (helm-python-sdk, no helm binary, no network)
and every object validated against the Kubernetes OpenAPI schemas (kubernetes-validate).

ServiceMonitor and PrometheusRule are CRDs that kubernetes-validate has no schema for; their structure
is checked by hand against what the Prometheus operator reads.
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import helm_python as helm
import kubernetes_validate
import pytest
import yaml

from grafana.build import RUNBOOK_BASE
from tests.support.checkov import checkov, needs_checkov

ROOT = Path(__file__).resolve().parent.parent
CHART_DIR = ROOT / "helm" / "opsd"
SCENARIOS = sorted((CHART_DIR / "ci").glob("*-values.yaml"))
KUBE_VERSION = "1.30"
RELEASE, NAMESPACE = "stream", "streaming"
FULLNAME = f"{RELEASE}-opsd"
CRD_KINDS = {"ServiceMonitor", "PrometheusRule"}
#: Spark on Kubernetes as the values turn it on: with the existing Secret of Spark's RPC secret, which it requires.
SPARK_AUTH_SECRET = "opsd-spark-auth"
SPARK_ON_K8S = {"enabled": True, "authSecret": {"existingSecret": SPARK_AUTH_SECRET}}
# Each optional feature, the values that turn it on, and the (kind, name) objects only it creates.
FEATURES = {
    "serviceMonitor": ({"serviceMonitor": {"enabled": True}}, {("ServiceMonitor", FULLNAME)}),
    "prometheusRule": ({"prometheusRule": {"enabled": True}}, {("PrometheusRule", FULLNAME)}),
    "dashboards": ({"dashboards": {"enabled": True}}, {("ConfigMap", f"{FULLNAME}-dashboards")}),
    "sparkOnKubernetes": ({"sparkOnKubernetes": SPARK_ON_K8S}, {
        ("Role", FULLNAME), ("RoleBinding", FULLNAME), ("Service", f"{FULLNAME}-driver"),
        ("ServiceAccount", f"{FULLNAME}-executor"), ("NetworkPolicy", f"{FULLNAME}-executors"),
    }),
    "serviceAccount": ({"serviceAccount": {"create": True}}, {("ServiceAccount", FULLNAME)}),
    "networkPolicy": ({"networkPolicy": {"enabled": True}}, {("NetworkPolicy", FULLNAME)}),
}
FEATURES_OFF = {"serviceAccount": {"create": False}}
# opsd's own config: opsd validates it and reports every invalid key, so the schema lists only the
# keys the chart reads and does not duplicate (and drift from) opsd's loader.
OPEN_OBJECTS = {("config",), ("config", "http")}


@pytest.fixture(scope="module")
def chart():
    with helm.Chart.load(CHART_DIR) as loaded:
        yield loaded


def scenario_values(path: Path) -> dict:
    return yaml.safe_load(path.read_text()) or {}


def merged(overrides: dict, base: dict | None = None) -> dict:
    """The default scenario's values (the chart's defaults plus one pipeline) with ``overrides`` merged in."""
    result = copy.deepcopy(base if base is not None else scenario_values(CHART_DIR / "ci" / "default-values.yaml"))
    for key, value in overrides.items():
        result[key] = merged(value, result[key]) if isinstance(value, dict) and isinstance(result.get(key), dict) \
            else copy.deepcopy(value)
    return result


def render(chart: helm.Chart, values: dict) -> list[dict]:
    """Every object the chart renders for ``values``, parsed from the manifests."""
    manifests = chart.render(merged(values), name=RELEASE, namespace=NAMESPACE)
    return [doc for text in manifests.values() for doc in yaml.safe_load_all(text) if doc]


def find(objects: list[dict], kind: str, name: str = FULLNAME) -> dict:
    """The one object of ``kind`` called ``name``."""
    matches = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name]
    assert len(matches) == 1, f"expected one {kind}/{name}, got {len(matches)}"
    return matches[0]


def opsd_container(objects: list[dict]) -> dict:
    return find(objects, "Deployment")["spec"]["template"]["spec"]["containers"][0]


def opsd_config(objects: list[dict]) -> dict:
    return yaml.safe_load(find(objects, "ConfigMap")["data"]["config.yaml"])


EXECUTOR_TEMPLATE_KEY = "executor-pod-template.yaml"
INGRESS_CONTROLLER = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "ingress-nginx"}}}


def executor_pod(objects: list[dict]) -> dict:
    """An executor pod as Spark builds it from the chart's pod template (the ConfigMap key the driver reads): the
    template plus the name, namespace and image Spark sets."""
    pod = yaml.safe_load(find(objects, "ConfigMap")["data"][EXECUTOR_TEMPLATE_KEY])
    pod["metadata"] |= {"name": f"{FULLNAME}-exec-1", "namespace": NAMESPACE}
    pod["spec"]["containers"][0]["image"] = opsd_config(objects)["spark"]["conf"]["spark.kubernetes.container.image"]
    return pod


def check_service_monitor(monitor: dict, objects: list[dict]) -> None:
    """A ServiceMonitor must select the opsd Service and scrape a port that Service names."""
    service = find(objects, "Service")
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    assert monitor["spec"]["namespaceSelector"] == {"matchNames": [NAMESPACE]}
    port_names = {port["name"] for port in service["spec"]["ports"]}
    for endpoint in monitor["spec"]["endpoints"]:
        assert endpoint["port"] in port_names
        assert endpoint["path"] == "/metrics"
        assert set(endpoint) <= {"port", "path", "interval", "scrapeTimeout", "relabelings", "authorization"}


def check_prometheus_rule(rule: dict) -> None:
    """A PrometheusRule's spec must be a rule file: named groups of rules with an expr each."""
    assert rule["apiVersion"] == "monitoring.coreos.com/v1"
    assert set(rule["spec"]) == {"groups"}
    for group in rule["spec"]["groups"]:
        assert set(group) <= {"name", "interval", "rules"} and group["name"]
        for item in group["rules"]:
            assert ("alert" in item) != ("record" in item) and isinstance(item["expr"], str)
            assert set(item) <= {"alert", "record", "expr", "for", "labels", "annotations"}


def validate(obj: dict, objects: list[dict]) -> None:
    """Validate one object: Kubernetes' own schema, or the by-hand checks for the two CRDs."""
    if obj["kind"] == "ServiceMonitor":
        check_service_monitor(obj, objects)
    elif obj["kind"] == "PrometheusRule":
        check_prometheus_rule(obj)
    else:
        kubernetes_validate.validate(obj, KUBE_VERSION, strict=True)


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda p: p.stem)
def test_every_scenario_renders_only_valid_kubernetes_objects(chart, scenario):
    objects = render(chart, scenario_values(scenario))
    assert objects
    for obj in objects:
        validate(obj, objects)
        assert obj["metadata"]["labels"]["app.kubernetes.io/instance"] == RELEASE


def test_the_scenarios_cover_the_default_all_features_and_a_yt_cluster_with_a_secret():
    assert {p.stem for p in SCENARIOS} == {"default-values", "all-features-values", "yt-cluster-values"}


def test_the_chart_passes_helm_lint_in_strict_mode():
    for scenario in SCENARIOS:
        report = helm.lint(CHART_DIR, scenario_values(scenario), strict=True, namespace=NAMESPACE)
        assert report["errors"] == []
        assert [m for m in report["messages"] if m["severity"] >= 2] == []


def test_the_deployment_runs_opsd_on_the_config_file_mounted_from_the_config_map(chart):
    objects = render(chart, merged({}))
    pod = find(objects, "Deployment")["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert [*container["command"], *container["args"]] == ["opsd", "run", "/etc/opsd/config.yaml"]
    mount = next(m for m in container["volumeMounts"] if m["mountPath"] == "/etc/opsd")
    volume = next(v for v in pod["volumes"] if v["name"] == mount["name"])
    config_map = find(objects, "ConfigMap", volume["configMap"]["name"])
    expected = merged(merged({}), base=chart.values)["config"]  # chart defaults + the scenario's pipeline
    del expected["spark"]["master"]  # empty: left to opsd's default
    assert yaml.safe_load(config_map["data"]["config.yaml"]) == expected


def test_the_token_is_read_from_the_existing_secret_into_yt_token(chart):
    objects = render(chart, scenario_values(CHART_DIR / "ci" / "yt-cluster-values.yaml"))
    env = {e["name"]: e for e in opsd_container(objects)["env"]}
    assert env["YT_TOKEN"] == {"name": "YT_TOKEN",
                               "valueFrom": {"secretKeyRef": {"name": "opsd-yt-token", "key": "YT_TOKEN"}}}
    assert not [o for o in objects if o["kind"] == "Secret"]


def test_without_an_existing_secret_no_token_is_passed(chart):
    env = {e["name"] for e in opsd_container(render(chart, merged({}))).get("env", [])}
    assert "YT_TOKEN" not in env


def test_the_pod_runs_as_non_root_with_probes_on_healthz_and_readyz(chart):
    objects = render(chart, merged({}))
    pod = find(objects, "Deployment")["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    assert container["startupProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}
    assert pod["serviceAccountName"] == find(objects, "ServiceAccount")["metadata"]["name"]


def test_the_http_port_of_the_config_is_the_container_and_service_port(chart):
    objects = render(chart, merged({"config": {"http": {"port": 8123}}}))
    assert opsd_container(objects)["ports"][0] == {"name": "http", "containerPort": 8123, "protocol": "TCP"}
    assert find(objects, "Service")["spec"]["ports"][0]["port"] == 8123


def test_the_spark_ui_port_of_the_config_is_a_container_and_service_port(chart):
    objects = render(chart, merged({"config": {"spark": {"ui_port": 4999}}}))
    assert {"name": "spark-ui", "containerPort": 4999, "protocol": "TCP"} in opsd_container(objects)["ports"]
    service_ports = {p["name"]: p["port"] for p in find(objects, "Service")["spec"]["ports"]}
    assert service_ports["spark-ui"] == 4999


@pytest.mark.parametrize("feature", FEATURES)
def test_an_optional_feature_creates_its_objects_only_when_enabled(chart, feature):
    on_values, created = FEATURES[feature]
    off_values = {feature: FEATURES_OFF.get(feature, {"enabled": False})}
    names = {(o["kind"], o["metadata"]["name"]) for o in render(chart, merged(off_values))}
    assert created & names == set()
    names = {(o["kind"], o["metadata"]["name"]) for o in render(chart, merged(on_values))}
    assert created <= names


def test_the_default_values_render_no_optional_objects(chart):
    kinds = {o["kind"] for o in render(chart, merged({}))}
    assert kinds == {"Deployment", "ConfigMap", "Service", "ServiceAccount", "NetworkPolicy"}


def test_the_prometheus_rule_carries_exactly_the_rules_of_the_alerts_file(chart):
    rule = find(render(chart, merged({"prometheusRule": {"enabled": True}})), "PrometheusRule")
    assert rule["spec"] == yaml.safe_load((CHART_DIR / "files" / "alerts.yaml").read_text())


def test_the_runbook_links_point_where_the_values_say_keeping_each_alerts_anchor(chart):
    def links(values: dict) -> dict[str, str]:
        rule = find(render(chart, merged({"prometheusRule": {"enabled": True, **values}})), "PrometheusRule")
        return {r["alert"]: r["annotations"]["runbook_url"] for g in rule["spec"]["groups"] for r in g["rules"]}

    shipped, moved = links({}), links({"runbookBaseUrl": "https://wiki.example.com/opsd/"})
    alerts = yaml.safe_load((CHART_DIR / "files" / "alerts.yaml").read_text())
    assert set(shipped) == set(moved) == {r["alert"] for g in alerts["groups"] for r in g["rules"]}
    # The default is the chart README's runbook sections, the base the dashboards link too (one value).
    assert shipped == {alert: f"{RUNBOOK_BASE}#{alert.lower()}" for alert in shipped}
    assert moved == {alert: f"https://wiki.example.com/opsd#{alert.lower()}" for alert in moved}


def test_the_service_monitor_relabels_the_job_to_opsd_as_the_absent_alert_expects(chart):
    monitor = find(render(chart, merged({"serviceMonitor": {"enabled": True}})), "ServiceMonitor")
    relabelings = monitor["spec"]["endpoints"][0]["relabelings"]
    assert {"action": "replace", "targetLabel": "job", "replacement": "opsd"} in relabelings
    assert 'up{job="opsd"}' in (CHART_DIR / "files" / "alerts.yaml").read_text()


def test_the_dashboards_config_map_holds_the_built_dashboards_under_the_sidecar_label(chart):
    config_map = find(render(chart, merged({"dashboards": {"enabled": True}})), "ConfigMap", f"{FULLNAME}-dashboards")
    assert config_map["metadata"]["labels"]["grafana_dashboard"] == "1"
    built = {p.name: json.loads(p.read_text()) for p in (ROOT / "grafana" / "dashboards").glob("*.json")}
    assert {name: json.loads(text) for name, text in config_map["data"].items()} == built


def test_spark_on_kubernetes_points_executors_at_the_driver_service(chart):
    objects = render(chart, merged({"sparkOnKubernetes": SPARK_ON_K8S}))
    settings = yaml.safe_load(find(objects, "ConfigMap")["data"]["config.yaml"])["spark"]
    spark = settings["conf"]
    assert settings["master"] == "k8s://https://kubernetes.default.svc"
    driver = find(objects, "Service", f"{FULLNAME}-driver")
    assert spark["spark.driver.host"] == f"{FULLNAME}-driver.{NAMESPACE}.svc"
    assert spark["spark.kubernetes.namespace"] == NAMESPACE
    assert driver["spec"]["clusterIP"] == "None"
    container_ports = {p["name"]: p["containerPort"] for p in opsd_container(objects)["ports"]}
    assert {p["targetPort"]: p["port"] for p in driver["spec"]["ports"]} == {
        "spark-driver": int(spark["spark.driver.port"]), "spark-blockmgr": int(spark["spark.driver.blockManager.port"]),
    }
    assert container_ports["spark-driver"] == int(spark["spark.driver.port"])
    binding = find(objects, "RoleBinding")
    assert binding["subjects"][0]["name"] == spark["spark.kubernetes.authenticate.driver.serviceAccountName"]


def test_spark_settings_given_in_values_win_over_the_derived_ones(chart):
    values = merged({"sparkOnKubernetes": SPARK_ON_K8S, "config": {
        "spark": {"master": "k8s://https://api:6443", "conf": {"spark.driver.port": "9999"}}}})
    spark = yaml.safe_load(find(render(chart, values), "ConfigMap")["data"]["config.yaml"])["spark"]
    assert spark["master"] == "k8s://https://api:6443"
    assert spark["conf"]["spark.driver.port"] == "9999"


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_the_rendered_config_is_one_opsd_accepts(chart, scenario, tmp_path):
    from opsd.config.load import load_config

    config_yaml = find(render(chart, scenario_values(scenario)), "ConfigMap")["data"]["config.yaml"]
    path = tmp_path / "config.yaml"
    path.write_text(config_yaml)
    assert [p.name for p in load_config(path).pipelines] == ["data_length"]


@pytest.mark.hostile
def test_the_uis_every_interface_leaves_the_drivers_rpc_and_block_manager_on_loopback_with_a_local_master(
        chart, tmp_path):
    from opsd.config.load import load_config
    from opsd.config.spark import LOCAL_IP_ENV, spark_defaults, spark_environment

    path = tmp_path / "config.yaml"
    path.write_text(find(render(chart, {}), "ConfigMap")["data"]["config.yaml"])
    config = load_config(path)
    assert config.spark.ui_host == "0.0.0.0" and config.spark.master.startswith("local")
    assert spark_environment(config, {}) == {LOCAL_IP_ENV: None}  # the UI on every interface, for the Service
    conf = spark_defaults(config)
    assert conf["spark.driver.bindAddress"] == conf["spark.driver.host"] == "127.0.0.1"


def test_values_without_a_pipeline_are_refused_at_install(chart):
    with pytest.raises(helm.HelmValuesError, match="pipelines"):
        render(chart, {"config": {"pipelines": []}})


def test_a_config_change_changes_the_pod_template_so_the_driver_restarts(chart):
    def checksum(values: dict) -> str:
        deployment = find(render(chart, merged(values)), "Deployment")
        return deployment["spec"]["template"]["metadata"]["annotations"]["checksum/config"]

    assert checksum({}) != checksum({"config": {"cluster": "yt://other"}})


@pytest.mark.parametrize("values", [
    {"unknownKey": 1},
    {"serviceMonitor": {"enabld": True}},
    {"ytToken": {"token": "plain-text-secret"}},
    {"httpAuth": {"enabled": True, "existingSecret": "s", "token": "plain-text-secret"}},
], ids=["top-level", "nested-typo", "token-in-plain-text", "bearer-token-in-plain-text"])
def test_the_schema_rejects_an_unknown_key(chart, values):
    with pytest.raises(helm.HelmValuesError, match="additional properties"):
        chart.render(merged(values), name=RELEASE, namespace=NAMESPACE)


#: A token as YTsaurus' OAuth issues them: none of the values below may reach a rendered object.
PLAIN_TOKEN = "AQAD-qJSJQAAAAExampleExampleExample"
#: A pipeline whose yt source carries `options`.
WITH_OPTIONS = {"name": "p", "source": {"format": "yt", "path": "//q", "options": {}}, "sink": {"format": "console"}}


@pytest.mark.hostile
@pytest.mark.parametrize("values", [
    {"extraEnv": [{"name": "YT_TOKEN", "value": "anything"}]},
    {"extraEnv": [{"name": "YT_CONFIG_PATCHES", "value": f'{{token="{PLAIN_TOKEN}"}}'}]},
    {"extraEnv": [{"name": "JAVA_TOOL_OPTIONS", "value": f"-Dyt.token={PLAIN_TOKEN}"}]},
    {"extraEnv": [{"name": "ANYTHING", "value": PLAIN_TOKEN}]},
    {"config": {"spark": {"conf": {"spark.executorEnv.YT_CONFIG_PATCHES": f'{{token="{PLAIN_TOKEN}"}}'}}}},
    {"config": {"spark": {"conf": {"spark.driver.extraJavaOptions": f"-Dssl.keyStorePassword={PLAIN_TOKEN}"}}}},
    {"config": {"spark": {"conf": {"spark.hadoop.yt.token": PLAIN_TOKEN}}}},
    {"config": {"spark": {"conf": {"spark.executorEnv.ANYTHING": PLAIN_TOKEN}}}},
    {"config": {"pipelines": [{**WITH_OPTIONS, "source": {**WITH_OPTIONS["source"], "options": {"token": "x"}}}]}},
    {"config": {"pipelines": [{**WITH_OPTIONS, "sink": {"format": "yt", "path": "//t",
                                                        "options": {"x": f'{{"token": "{PLAIN_TOKEN}"}}'}}}]}},
], ids=["env-yt-token", "env-patches", "env-jvm-option", "env-token-shaped", "conf-patches", "conf-jvm-password",
        "conf-secret-key", "conf-token-shaped", "source-option-key", "sink-option-value"])
def test_a_secret_in_plain_text_is_refused_before_it_reaches_the_pod_spec_or_the_config_map(chart, values):
    """Issue 32: the ConfigMap and the pod spec are readable by whoever may read them, before opsd loads its config:
    a token in `extraEnv`, `spark.conf` or an option is refused at install, the error never quoting it."""
    with pytest.raises(helm.HelmValuesError) as refused:
        chart.render(merged(values), name=RELEASE, namespace=NAMESPACE)
    assert PLAIN_TOKEN not in str(refused.value)


def test_references_to_secrets_stay_accepted(chart):
    env = [{"name": "YT_TOKEN_PATH", "value": "/var/run/secrets/yt/token"},
           {"name": "YT_CONFIG_PATCHES", "value": '{token_path="/var/run/secrets/yt/token"}'},
           {"name": "YT_TOKEN", "valueFrom": {"secretKeyRef": {"name": "yt", "key": "token"}}}]
    conf = {"spark.authenticate.secret.file": "/etc/spark/secret", "spark.ssl.keyStorePasswordFile": "/etc/p",
            "spark.kubernetes.executor.secretKeyRef.YT_TOKEN": "yt:token", "spark.sql.shuffle.partitions": 4}
    objects = render(chart, {"extraEnv": env, "config": {"spark": {"conf": conf}}})
    assert {e["name"] for e in opsd_container(objects)["env"]} >= {"YT_TOKEN_PATH", "YT_CONFIG_PATCHES"}


@pytest.mark.parametrize("values", [
    {"config": {"http": {"port": "9464"}}},
    {"serviceMonitor": {"enabled": "yes"}},
    {"image": {"pullPolicy": "Sometimes"}},
], ids=["port-as-string", "flag-as-string", "enum"])
def test_the_schema_rejects_a_wrong_type_or_value(chart, values):
    with pytest.raises(helm.HelmValuesError):
        chart.render(merged(values), name=RELEASE, namespace=NAMESPACE)


def schema_paths(schema: dict, prefix: tuple[str, ...] = ()) -> dict[tuple[str, ...], dict]:
    """Every property of the schema, by key path."""
    paths = {}
    for key, sub in schema.get("properties", {}).items():
        path = (*prefix, key)
        paths[path] = sub
        paths |= schema_paths(sub, path)
    return paths


def commented_keys(values_yaml: str) -> dict[tuple[str, ...], bool]:
    """Each key path of values.yaml and whether a comment line sits directly above it."""
    stack: list[tuple[int, str]] = []
    keys, previous = {}, ""
    for line in values_yaml.splitlines():
        if match := re.match(r"^(\s*)([\w.-]+):", line):
            indent = len(match.group(1))
            stack = [(i, k) for i, k in stack if i < indent] + [(indent, match.group(2))]
            keys[tuple(k for _, k in stack)] = previous.lstrip().startswith("#")
        if line.strip():
            previous = line
    return keys


def test_every_schema_property_has_a_description_and_nested_objects_are_closed():
    schema = json.loads((CHART_DIR / "values.schema.json").read_text())
    assert schema["$schema"] == "http://json-schema.org/draft-07/schema#"
    assert schema["additionalProperties"] is False
    for path, sub in schema_paths(schema).items():
        assert sub.get("description"), path
        if "properties" in sub and path not in OPEN_OBJECTS:
            assert sub["additionalProperties"] is False, path


def test_every_values_key_has_a_comment_and_a_schema_property():
    schema = schema_paths(json.loads((CHART_DIR / "values.schema.json").read_text()))
    keys = commented_keys((CHART_DIR / "values.yaml").read_text())
    documented = {path: commented for path, commented in keys.items() if path in schema}
    assert [path for path, commented in documented.items() if not commented] == []
    assert {path for path in keys if len(path) == 1} <= set(schema)


@needs_checkov
def test_checkov_passes_every_scenario_or_skips_a_check_with_a_written_reason(chart, tmp_path):
    for scenario in SCENARIOS:
        manifests = chart.render(merged(scenario_values(scenario)), name=RELEASE, namespace=NAMESPACE)
        objects = [doc for text in manifests.values() for doc in yaml.safe_load_all(text) if doc]
        pods = [executor_pod(objects)] if EXECUTOR_TEMPLATE_KEY in find(objects, "ConfigMap")["data"] else []
        (tmp_path / f"{scenario.stem}.yaml").write_text(
            "\n---\n".join([*manifests.values(), *map(yaml.safe_dump, pods)]))
    failed, skipped = checkov(tmp_path, "kubernetes")
    assert failed == []
    assert [s["check_id"] for s in skipped if len(s["check_result"].get("suppress_comment", "")) < 20] == []


def test_the_network_policy_admits_the_ports_the_pod_serves_and_no_other(chart):
    objects = render(chart, merged({"sparkOnKubernetes": SPARK_ON_K8S}))
    policy = find(objects, "NetworkPolicy")
    admitted = {port["port"] for rule in policy["spec"]["ingress"] for port in rule["ports"]}
    assert admitted == {port["name"] for port in opsd_container(objects)["ports"]}
    assert policy["spec"]["podSelector"]["matchLabels"].items() <= \
        find(objects, "Deployment")["spec"]["template"]["metadata"]["labels"].items()


def test_the_service_account_token_is_mounted_only_for_spark_on_kubernetes(chart):
    def mounted(values: dict) -> bool:
        return find(render(chart, merged(values)), "Deployment")["spec"]["template"]["spec"][
            "automountServiceAccountToken"]

    assert mounted({}) is False
    assert mounted({"sparkOnKubernetes": SPARK_ON_K8S}) is True


def test_the_spark_ui_can_be_reached_through_an_optional_ingress_on_the_services_port(chart):
    assert not [o for o in render(chart, merged({})) if o["kind"] == "Ingress"], "off by default"
    objects = render(chart, merged({"sparkUiIngress": {"enabled": True, "host": "ui.example.com"},
                                    "networkPolicy": {"sparkUiFrom": [INGRESS_CONTROLLER]}}))
    ingress = find(objects, "Ingress", f"{FULLNAME}-spark-ui")
    [rule] = ingress["spec"]["rules"]
    backend = rule["http"]["paths"][0]["backend"]["service"]
    assert rule["host"] == "ui.example.com" and backend == {"name": FULLNAME, "port": {"name": "spark-ui"}}
    assert "spark-ui" in {p["name"] for p in find(objects, "Service")["spec"]["ports"]}



# -- Spark on Kubernetes: least privilege, the token to executors, authenticated and encrypted RPC ---------------

SPARK_ON_KUBERNETES = ROOT / "examples" / "values" / "spark-on-kubernetes.yaml"


def spark_on_kubernetes(chart: helm.Chart, **overrides: object) -> list[dict]:
    """The shipped example of executors on Kubernetes (with a YT token Secret), rendered."""
    return render(chart, merged(overrides, base=merged(scenario_values(SPARK_ON_KUBERNETES))))


@pytest.mark.hostile
def test_executors_get_yt_token_from_the_same_secret_as_the_driver(chart):
    objects = spark_on_kubernetes(chart)
    conf = opsd_config(objects)["spark"]["conf"]
    driver_env = {e["name"]: e for e in opsd_container(objects)["env"]}
    pod = executor_pod(objects)
    [container] = [c for c in pod["spec"]["containers"]
                   if c["name"] == conf["spark.kubernetes.executor.podTemplateContainerName"]]
    executor_env = {e["name"]: e for e in container["env"]}
    assert executor_env["YT_TOKEN"] == driver_env["YT_TOKEN"]
    assert driver_env["YT_TOKEN"]["valueFrom"]["secretKeyRef"]["name"] == "opsd-yt-token"
    # The driver reads the template where the chart mounts the ConfigMap key.
    mount = next(m for m in opsd_container(objects)["volumeMounts"] if m["name"] == "config")
    assert conf["spark.kubernetes.executor.podTemplateFile"] == f"{mount['mountPath']}/{EXECUTOR_TEMPLATE_KEY}"
    kubernetes_validate.validate(pod, KUBE_VERSION, strict=True)


def test_without_a_token_secret_executors_get_no_token_either(chart):
    pod = executor_pod(render(chart, merged({"sparkOnKubernetes": SPARK_ON_K8S})))
    assert "YT_TOKEN" not in {e["name"] for e in pod["spec"]["containers"][0]["env"]}


@pytest.mark.hostile
def test_the_drivers_role_holds_only_what_sparks_scheduler_backend_calls(chart):
    role = find(spark_on_kubernetes(chart), "Role")
    rules = {tuple(r["resources"]): set(r["verbs"]) for r in role["rules"]}
    assert all(r["apiGroups"] == [""] for r in role["rules"])
    assert rules == {("pods",): {"create", "get", "list", "watch", "patch", "delete", "deletecollection"},
                     ("configmaps",): {"create", "get", "list", "delete", "deletecollection"}}


@pytest.mark.hostile
def test_executors_run_as_their_own_service_account_without_a_token(chart):
    objects = spark_on_kubernetes(chart)
    conf = opsd_config(objects)["spark"]["conf"]
    account = find(objects, "ServiceAccount", conf["spark.kubernetes.authenticate.executor.serviceAccountName"])
    assert account["metadata"]["name"] != conf["spark.kubernetes.authenticate.driver.serviceAccountName"]
    assert account["automountServiceAccountToken"] is False
    pod = executor_pod(objects)
    assert pod["spec"]["automountServiceAccountToken"] is False
    assert pod["spec"]["serviceAccountName"] == account["metadata"]["name"]
    bound = [s["name"] for b in objects if b["kind"] == "RoleBinding" for s in b["subjects"]]
    assert account["metadata"]["name"] not in bound


@pytest.mark.hostile
def test_executors_run_under_the_pods_security_contexts(chart):
    objects = spark_on_kubernetes(chart)
    pod, driver = executor_pod(objects), find(objects, "Deployment")["spec"]["template"]["spec"]
    assert pod["spec"]["securityContext"] == driver["securityContext"]
    assert pod["spec"]["containers"][0]["securityContext"] == opsd_container(objects)["securityContext"]
    # A read-only root: /tmp (HOME) is a volume, as in the driver.
    tmp = next(m for m in pod["spec"]["containers"][0]["volumeMounts"] if m["mountPath"] == "/tmp")
    assert {"name": tmp["name"], "emptyDir": {}} in pod["spec"]["volumes"]


@pytest.mark.hostile
def test_spark_rpc_is_authenticated_and_encrypted_with_the_existing_secret_mounted_as_a_file(chart):
    objects = spark_on_kubernetes(chart)
    conf = opsd_config(objects)["spark"]["conf"]
    assert conf["spark.authenticate"] == conf["spark.network.crypto.enabled"] == "true"
    # One key for both sides (the .driver / .executor ones fall back to it): an executor's first connection, which
    # fetches the driver's conf, reads only this one (tests/test_kubernetes.py fails without it).
    assert "spark.authenticate.secret.driver.file" not in conf and "spark.authenticate.secret.executor.file" not in conf
    for spec, container, key in ((find(objects, "Deployment")["spec"]["template"]["spec"], opsd_container(objects),
                                  "spark.authenticate.secret.file"),
                                 (executor_pod(objects)["spec"], executor_pod(objects)["spec"]["containers"][0],
                                  "spark.authenticate.secret.file")):
        volume = next(v for v in spec["volumes"] if v.get("secret", {}).get("secretName") == SPARK_AUTH_SECRET)
        assert volume["secret"]["items"] == [{"key": "secret", "path": "secret"}]
        mount = next(m for m in container["volumeMounts"] if m["name"] == volume["name"])
        assert conf[key] == f"{mount['mountPath']}/secret" and mount["readOnly"] is True
    # Spark puts the secret in the executors' environment (visible to whoever reads pods) only without the file.
    assert "SPARK_AUTH_SECRET" not in json.dumps(objects)


@pytest.mark.hostile
def test_two_renders_of_the_same_values_give_the_same_spark_rpc_secret_which_the_chart_never_generates(chart):
    first, second = spark_on_kubernetes(chart), spark_on_kubernetes(chart)
    assert first == second  # a GitOps render or `helm template` changes nothing, the secret least of all
    assert [o for o in first if o["kind"] == "Secret"] == []


def test_naming_another_rpc_secret_restarts_the_driver_and_reloader_restarts_it_when_the_secret_changes(chart):
    def pod_template(objects: list[dict]) -> dict:
        return find(objects, "Deployment")["spec"]["template"]

    objects = spark_on_kubernetes(chart)
    rotated = spark_on_kubernetes(chart, sparkOnKubernetes={"authSecret": {"existingSecret": "opsd-spark-auth-2"}})
    assert pod_template(objects)["metadata"]["annotations"]["checksum/config"] != \
        pod_template(rotated)["metadata"]["annotations"]["checksum/config"]
    annotations = find(objects, "Deployment")["metadata"]["annotations"]
    assert annotations["secret.reloader.stakater.com/reload"] == SPARK_AUTH_SECRET


def test_spark_authentication_without_a_named_secret_is_refused_saying_how_to_make_one(chart):
    with pytest.raises(helm.HelmRenderError, match="kubectl create secret generic"):
        render(chart, merged({"sparkOnKubernetes": {"enabled": True}}))


def test_the_driver_pod_name_comes_from_the_downward_api_so_executors_are_owned_by_the_driver(chart):
    objects = spark_on_kubernetes(chart)
    pod_name = opsd_config(objects)["spark"]["conf"]["spark.kubernetes.driver.pod.name"]
    variable = re.fullmatch(r"\$\{env:(\w+)\}", pod_name).group(1)  # Spark expands ${env:NAME} in conf values
    env = {e["name"]: e for e in opsd_container(objects)["env"]}
    assert env[variable]["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.name"}}


def test_rpc_authentication_can_be_turned_off(chart):
    objects = render(chart, merged({"sparkOnKubernetes": {"enabled": True, "authenticate": False}}))
    conf = opsd_config(objects)["spark"]["conf"]
    assert "spark.authenticate" not in conf and not [o for o in objects if o["kind"] == "Secret"]
    assert "spark-auth" not in json.dumps(executor_pod(objects))


def admitted(policy: dict) -> dict[str, list[dict] | None]:
    """Port (or "*") -> the peers admitted to it (None: any)."""
    return {port["port"] if "ports" in rule else "*": rule.get("from")
            for rule in policy["spec"]["ingress"] for port in rule.get("ports", [{"port": "*"}])}


def matches(selector: dict, labels: dict) -> bool:
    return selector["matchLabels"].items() <= labels.items()


@pytest.mark.hostile
def test_executor_pods_are_under_a_network_policy_and_reach_only_the_drivers_ports(chart):
    objects = spark_on_kubernetes(chart)
    executor_labels = executor_pod(objects)["metadata"]["labels"]
    driver_labels = find(objects, "Deployment")["spec"]["template"]["metadata"]["labels"]
    executors = find(objects, "NetworkPolicy", f"{FULLNAME}-executors")
    assert matches(executors["spec"]["podSelector"], executor_labels)
    assert not matches(executors["spec"]["podSelector"], driver_labels)
    assert not matches(find(objects, "Deployment")["spec"]["selector"], executor_labels), "the Deployment's pods"
    [peers] = admitted(executors).values()
    assert [p for p in peers if not (matches(p["podSelector"], executor_labels)
                                     or matches(p["podSelector"], driver_labels))] == []
    driver = admitted(find(objects, "NetworkPolicy"))
    for port in ("spark-driver", "spark-blockmgr"):
        assert [matches(p["podSelector"], executor_labels) for p in driver[port]] == [True]


@pytest.mark.hostile
def test_the_spark_ui_is_reachable_only_from_the_opsd_pod_and_the_peers_the_values_name(chart):
    objects = render(chart, merged({}))
    ui = admitted(find(objects, "NetworkPolicy"))["spark-ui"]
    driver_labels = find(objects, "Deployment")["spec"]["template"]["metadata"]["labels"]
    assert len(ui) == 1 and matches(ui[0]["podSelector"], driver_labels)  # the OOM check reads its REST API
    assert admitted(find(objects, "NetworkPolicy"))["http"] is None  # metrics and probes: any, unless httpFrom
    opened = render(chart, merged({"networkPolicy": {"sparkUiFrom": [INGRESS_CONTROLLER]}}))
    assert admitted(find(opened, "NetworkPolicy"))["spark-ui"][1:] == [INGRESS_CONTROLLER]
    assert opsd_config(objects)["spark"]["ui_host"] == "0.0.0.0"


def test_an_ingress_to_the_spark_ui_needs_the_peers_the_network_policy_admits(chart):
    with pytest.raises(helm.HelmRenderError, match=r"networkPolicy\.sparkUiFrom"):
        render(chart, merged({"sparkUiIngress": {"enabled": True, "host": "ui.example.com"}}))


HTTP_TOKEN_SECRET = "opsd-http-token"


@pytest.mark.hostile
def test_the_bearer_token_guards_the_endpoint_from_a_secret_file_that_the_service_monitor_sends_too(chart):
    objects = render(chart, merged({"httpAuth": {"enabled": True, "existingSecret": HTTP_TOKEN_SECRET, "key": "tok"},
                                    "serviceMonitor": {"enabled": True}}))
    token_file = opsd_config(objects)["http"]["bearer_token_file"]
    pod = find(objects, "Deployment")["spec"]["template"]["spec"]
    [volume] = [v for v in pod["volumes"] if v.get("secret", {}).get("secretName") == HTTP_TOKEN_SECRET]
    [mount] = [m for m in pod["containers"][0]["volumeMounts"] if m["name"] == volume["name"]]
    assert mount["readOnly"] and token_file == f"{mount['mountPath']}/{volume['secret']['items'][0]['path']}"
    assert volume["secret"]["items"][0]["key"] == "tok"
    assert all(HTTP_TOKEN_SECRET not in str(env) for env in pod["containers"][0]["env"]), "a file, never a variable"
    [endpoint] = find(objects, "ServiceMonitor")["spec"]["endpoints"]
    assert endpoint["authorization"] == {"type": "Bearer", "credentials": {"name": HTTP_TOKEN_SECRET, "key": "tok"}}
    for obj in objects:
        validate(obj, objects)


def test_without_http_auth_the_endpoint_asks_for_no_token_and_the_service_monitor_sends_none(chart):
    objects = render(chart, merged({"serviceMonitor": {"enabled": True}}))
    assert "bearer_token_file" not in opsd_config(objects)["http"]
    assert "authorization" not in find(objects, "ServiceMonitor")["spec"]["endpoints"][0]


def test_http_auth_without_a_named_secret_is_refused_saying_how_to_make_one(chart):
    with pytest.raises(helm.HelmRenderError, match="kubectl create secret generic opsd-http-token"):
        render(chart, merged({"httpAuth": {"enabled": True}}))
