"""The client registry (workloads/manifests): manifests read and checked, abilities that refuse
what a client cannot do before a run starts, and a built client (franz-go) really built, and
refusing a bad configuration the way the contract says."""

from __future__ import annotations

import dataclasses
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from common.errors import HarnessError
from workloads import client_registry as reg
from workloads.eos.config import CLIENTS, EosOptions


def test_every_manifest_reads_and_the_clients_are_the_registry_s() -> None:
    known = reg.manifests()
    assert {"python", "java", "copier", "franz-go", "kafkajs", "confluent-js"} <= set(known)
    assert CLIENTS[0] == "python" and set(CLIENTS) == set(reg.names("eos"))
    assert set(reg.names("queue")) == {"python", "java"}
    assert "copier" not in reg.contract_clients()
    assert {"franz-go", "kafkajs", "confluent-js"} <= set(reg.contract_clients())
    fg = known["franz-go"]
    assert not fg.builtin and fg.build_kind == "go" and fg.start["eos"] == ("{binary}",)
    assert fg.abilities.variants == ("eos", "read-uncommitted") and fg.abilities.arm == "signal"
    assert known["java"].abilities.arm == "file" and not known["copier"].abilities.hooks
    # The two Node clients share the contract's half of their processor (workloads/node).
    shared = reg.PROJECT_ROOT / "workloads" / "node" / "contract.js"
    assert known["kafkajs"].shared == known["confluent-js"].shared == (shared,)
    assert known["confluent-js"].build_env == {"CKJS_LINKING": "dynamic"}


@pytest.mark.parametrize(
    ("edit", "expect"),
    [
        (lambda t: t + "\nfavourite = 1\n", "unknown key 'favourite'"),
        (lambda t: t.replace('name = "franz-go"', 'name = "other"'), "is not the file's name"),
        (lambda t: t.replace('kind = "go"', 'kind = "cargo"'), "build.kind must be one of"),
        (lambda t: t.replace('arm = "signal"', 'arm = "telepathy"'), "abilities.arm must be"),
        (lambda t: t.replace('eos = ["{binary}"]', ""), "no start.eos"),
        (lambda t: t.replace('library = "github.com/twmb/franz-go"\n', ""), "missing key"),
        (lambda t: t + "[[[", "bad client manifest"),
        (lambda t: t.replace("[start]", 'shared = ["nowhere.js"]\n[start]'), "is not a file"),
        (lambda t: t.replace("[start]", "env = 3\n[start]"), "build.env must be a table"),
    ],
)
def test_a_bad_manifest_is_one_line(tmp_path: Path, edit, expect: str) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "franz-go.toml"
    path.write_text(edit((reg.MANIFEST_DIR / "franz-go.toml").read_text()))
    with pytest.raises(HarnessError, match="bad client manifest") as e:
        reg.parse(path)
    assert expect in str(e.value) and "\n" not in str(e.value)


def test_an_unknown_client_names_the_registered_ones() -> None:
    with pytest.raises(
        HarnessError, match="unknown client 'sarama'; registered: confluent-js, copier, "
    ):
        reg.get("sarama")


@pytest.mark.parametrize(
    ("options", "expect"),
    [
        ({"variant": "at-least-once"}, "--variant at-least-once: client franz-go runs only eos"),
        ({"group_protocol": "consumer"}, "--group-protocol consumer: client franz-go runs only"),
    ],
)
def test_abilities_refuse_what_the_client_cannot_do(options: dict, expect: str) -> None:
    with pytest.raises(HarnessError) as e:
        EosOptions(client="franz-go", **options).validate()
    assert str(e.value) == expect or str(e.value).startswith(expect)


@pytest.mark.parametrize(
    ("client", "fresh", "setting"),
    [
        ("franz-go", True, "acks"),
        ("kafkajs", True, "acks"),
        # Its build compiles librdkafka (a minute): the install's build, not a fresh one.
        ("confluent-js", False, "group.id"),
    ],
)
def test_a_built_client_is_built_once_and_refuses_a_bad_config_with_status_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, client: str, fresh: bool, setting: str
) -> None:
    if fresh:
        monkeypatch.setenv("KAFKA_HARNESS_CACHE", str(tmp_path / "cache"))
    m = reg.get(client)
    built = reg.ensure_built(m)
    assert built == reg.build_path(m) and built.exists()
    assert reg.ensure_built(m) == built  # the same content is never built twice
    argv = reg.command(m, "eos")
    if fresh:
        assert str(tmp_path / "cache") in " ".join(argv)
    good = {
        "instance": 1, "slot": 0, "bootstrap": "127.0.0.1:1", "input_topic": "i",
        "output_topic": "o", "output_partitions": 1, "group_id": "g",
        "history_path": str(tmp_path / "1.jsonl"),
    }  # fmt: skip
    bad_configs = [
        {**good, "colour": "blue"},
        {**good, "variant": "no-rewind"},
        {**good, "client_config": {setting: "1"}},
        {k: v for k, v in good.items() if k != "group_id"},
    ]
    says = ['unknown field "colour"', "implements only eos", f'client_config "{setting}"']
    for bad, expect in zip(bad_configs, [*says, "are required"], strict=True):
        done = subprocess.run(
            [*argv, "--config", json.dumps(bad)], capture_output=True, text=True, timeout=30
        )
        assert done.returncode == 2, done.stderr
        assert expect in done.stderr and done.stderr.count("\n") == 1, done.stderr
    assert not (tmp_path / "1.jsonl").exists()  # a refused config records nothing


def test_a_client_that_does_not_compile_is_one_line_with_the_compiler_s_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KAFKA_HARNESS_CACHE", str(tmp_path / "cache"))
    m = reg.get("franz-go")
    assert m.build_dir is not None
    src = tmp_path / "src"
    shutil.copytree(m.build_dir, src)
    main = src / "main.go"
    main.write_text(main.read_text().replace("p.seq++", "p.seq += undefinedThing"))
    broken = dataclasses.replace(m, build_dir=src)
    with pytest.raises(HarnessError) as e:
        reg.ensure_built(broken)
    msg = str(e.value)
    assert msg.startswith("building client franz-go failed: ") and "undefinedThing" in msg
    assert "main.go:" in msg and "\n" not in msg
    assert not reg.build_path(broken).exists()


CLIENTS_DIR = Path(__file__).parent / "data" / "clients"


def test_a_user_s_manifest_directory_adds_clients_and_cannot_shadow_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(reg.MANIFESTS_ENV, str(CLIENTS_DIR))
    m = reg.get("broken-python")
    assert m.build_kind == "script" and m.build_dir == CLIENTS_DIR
    assert "broken-python" in reg.names("eos") and "broken-python" in reg.contract_clients()
    argv = reg.command(m, "eos")
    assert argv[1] == str(CLIENTS_DIR / "broken_processor.py") and Path(argv[0]).exists()
    shadow = tmp_path / "python.toml"
    shadow.write_text((reg.MANIFEST_DIR / "python.toml").read_text())
    monkeypatch.setenv(reg.MANIFESTS_ENV, str(tmp_path))
    with pytest.raises(HarnessError, match=r"python.toml: client 'python' is already .*python"):
        reg.manifests()
    monkeypatch.setenv(reg.MANIFESTS_ENV, str(tmp_path / "nowhere"))
    with pytest.raises(HarnessError, match=r"MANIFESTS: .*nowhere is not a directory"):
        reg.manifests()


def test_a_user_s_manifest_cannot_be_the_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = (CLIENTS_DIR / "broken-python.toml").read_text()
    (tmp_path / "mine.toml").write_text(
        text.replace('name = "broken-python"', 'name = "mine"\ndefault = true')
    )
    monkeypatch.setenv(reg.MANIFESTS_ENV, str(tmp_path))
    with pytest.raises(HarnessError, match=r"mine\.toml: bad client manifest: default is for"):
        reg.manifests()


class _Cluster:
    def java_client_command(self, main_class: str, jvm_opts: tuple[str, ...] = ()) -> list[str]:
        return ["java", *jvm_opts, "-cp", "jars", main_class]


def test_how_a_client_starts_is_its_manifest_s() -> None:
    """The default, the start of the builtin processors, Kafka's copier's adapter and feeding,
    and what the checkers are told of a client: all read from the manifests."""
    assert reg.default("eos") == reg.default("queue") == "python"
    assert reg.names("eos")[:3] == ("python", "java", "copier")
    py, java, copier = reg.get("python"), reg.get("java"), reg.get("copier")
    assert reg.command(py, "queue", python="/other/python") == [
        "/other/python", "-m", "workloads.queue.client"
    ]  # fmt: skip
    assert reg.runs_on_python(py, "eos") and not reg.runs_on_python(java, "eos")
    assert reg.command(java, "eos", _Cluster()) == [
        "java", *reg.JVM_OPTS, "-cp", "jars", "kafkaharness.EosProcessor"
    ]  # fmt: skip
    with pytest.raises(HarnessError, match="needs a cluster"):
        reg.command(java, "queue")
    assert java.build_kind == "kafka-java" and java.builtin
    assert copier.abilities.feed_first and not py.abilities.feed_first
    assert reg.adapter(copier, "eos") is not None and reg.adapter(py, "eos") is None
    assert py.abilities.probe_client_config and not java.abilities.probe_client_config
    assert reg.findings("kafkajs") == ["F7"] and reg.findings("java") == []
    assert reg.findings("confluent-js") == reg.findings("python") == ["F5"]


@pytest.mark.parametrize(
    ("options", "expect"),
    [
        ({"client_config": {"retries": "1"}}, "--client-config: client copier takes no client"),
        ({"txn_delay_ms": 10}, "--txn-delay-ms: client copier has no pause between"),
        ({"variant": "no-rewind"}, "--variant no-rewind: client copier runs only eos"),
        ({"client_python": "/usr/bin/python3"}, "--client-python: the copier client does not"),
    ],
)
def test_the_copier_s_refusals_are_its_manifest_s(options: dict, expect: str) -> None:
    with pytest.raises(HarnessError) as e:
        EosOptions(client="copier", **options).validate()
    assert str(e.value).startswith(expect)
