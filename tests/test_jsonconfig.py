"""The one strict reader of JSON configurations, and the three configurations that use it
(the eos processor's, the queue client's and the queue workload's options)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from common.errors import HarnessError
from workloads.eos.config import EosOptions, Hook, ProcessorConfig
from workloads.jsonconfig import from_json
from workloads.queue.config import BadConfig, ClientConfig
from workloads.queue.options import QueueOptions


@dataclass
class _Inner:
    n: int


@dataclass
class _Outer:
    name: str
    inner: _Inner | None = None


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("not json", "thing options are not JSON"),
        ("[1]", "thing options must be a JSON object"),
        ('{"name": "a", "nmae": 1, "zz": 2}', r"unknown thing option\(s\): nmae, zz"),
        ("{}", "bad thing options: .*name"),
        ('{"name": "a", "inner": {"m": 1}}', "bad thing options: .*m"),
    ],
)
def test_every_mistake_is_refused_in_the_same_words(text: str, message: str) -> None:
    with pytest.raises(HarnessError, match=message):
        from_json(_Outer, text, "thing", nested={"inner": lambda raw: _Inner(**raw)})


def test_nested_values_are_converted_and_the_error_type_is_the_callers() -> None:
    got = from_json(
        _Outer,
        '{"name": "a", "inner": {"n": 2}}',
        "thing",
        nested={"inner": lambda raw: _Inner(**raw)},
    )
    assert got == _Outer("a", _Inner(2))
    with pytest.raises(BadConfig, match="unknown thing option"):
        from_json(_Outer, {"bogus": 1}, "thing", BadConfig)


def test_the_three_configurations_share_the_reader(tmp_path) -> None:  # type: ignore[no-untyped-def]
    cfg = EosOptions().processor_config(1, 0, "b:1", "/tmp/1.jsonl")
    cfg.hook = Hook(at="after-flush", txn=2, action="stop")
    assert ProcessorConfig.from_json(cfg.to_json()) == cfg
    with pytest.raises(HarnessError, match=r"unknown processor option\(s\): bogus"):
        ProcessorConfig.from_json('{"bogus": 1}')
    client = ClientConfig(1, "b:1", "t", 2, str(tmp_path / "1.jsonl"), "g", "t-1")
    assert ClientConfig.from_json(client.to_json()) == client
    with pytest.raises(BadConfig, match="queue client options must be a JSON object"):
        ClientConfig.from_json("[]")
    assert QueueOptions.from_dict({"keys": 2}).keys == 2
    with pytest.raises(HarnessError, match=r"unknown queue option\(s\): topics"):
        QueueOptions.from_dict({"topics": 3})
