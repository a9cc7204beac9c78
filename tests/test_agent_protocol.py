"""The agent's protocol without SSH: one JSON line in, one out, parsed into
each op's typed arguments; the controller's reply models read what it sends."""
from __future__ import annotations

import io
import json

import pytest

from softnet.hosts import agent_protocol as proto
from softnet.hosts.agent import OPS, PROTOCOL_VERSION, START, Agent
from softnet.hosts.safety import PortSpec, refusals
from softnet.tools.journal import Header


def ask(agent: Agent, **req) -> dict:
    agent.out = io.StringIO()
    agent._handle(json.dumps(req).encode())
    return json.loads(agent.out.getvalue())


@pytest.fixture
def agent(tmp_path):
    a = Agent(tmp_path, 10.0, io.StringIO())
    yield a
    a.undo()


def test_every_op_in_the_table_and_hello_lists_them(agent):
    assert set(OPS) >= {"hello", "time", "lease", "check", "reserve", "apply", "start", "poll", "interrupt",
                        "wait", "drain", "timeline", "read", "stop", "reads", "window", "collect", "clean",
                        "undo", "bye"}
    assert set(START) == {"sink", "gen", "stalls", "injector", "profiler", "sampler", "victim", "stacks"}
    r = ask(agent, id=1, op="hello", version=PROTOCOL_VERSION, controller="me@there pid 1")
    assert r["ok"] and r["id"] == 1 and r["ops"] == sorted(OPS)
    hello = proto.Hello.model_validate(r)
    assert hello.version == PROTOCOL_VERSION and list(hello.host.provenance()) == [
        k for k in r["host"] if k != "sysctls"]  # the agent's order, kept in a raw trial
    assert agent.controller == "me@there pid 1"


def test_arguments_are_checked_and_named(agent):
    assert ask(agent, id=2, op="lease", seconds=3) == {"id": 2, "ok": True, "lease_until_s": 3.0}
    r = ask(agent, id=3, op="lease", secs=1)
    assert not r["ok"] and r["error"] == "lease: seconds: Missing required argument; secs: Unexpected keyword argument"
    r = ask(agent, id=4, op="fly")
    assert not r["ok"] and r["error"].startswith("unknown op 'fly'; accepted: apply, bye")
    r = ask(agent, id=5, op="start", tool="teleporter")
    assert r["field"] == "tool" and "accepted: sink, gen" in r["error"]
    r = ask(agent, id=6, op="start", tool="sink", ifname="x", count=1)
    assert not r["ok"] and r["error"] == "start: warmup: Field required"
    assert agent.journal is None  # refused before anything was journalled
    r = ask(agent, id=7, op="start", tool="injector", cpu=0, busy_ms=1, every_ms=10, nice=5)
    assert r["error"] == "start: nice: Extra inputs are not permitted"
    assert ask(agent, id=8, op="poll", handle="h")["field"] == "handle"


def test_a_module_registers_its_own_ops(agent, monkeypatch):
    monkeypatch.setitem(OPS, "echo", lambda a, text: {"echo": text, "lease_s": a.lease_s})
    assert ask(agent, id=9, op="echo", text="hi") == {"id": 9, "ok": True, "echo": "hi", "lease_s": 10.0}


def test_refusals_name_the_inventory_field():
    port = PortSpec.model_validate({"field": "hosts.x.interfaces.0", "name": "eth7", "mac": "02:00:00:00:00:01",
                                    "pci": "", "driver": "veth", "role": "sut_in", "link": "l1"})
    assert [r.field for r in refusals(port, None, {})] == ["hosts.x.interfaces.0.name"]


def test_replies_read_what_the_agent_sends():
    answer = proto.Answer.model_validate_json('{"id": 3, "ok": true, "journals": [{"journal": "/j", '
                                              '"pending": ["a"]}], "errors": []}')
    assert answer.ok and answer.body() == {"journals": [{"journal": "/j", "pending": ["a"]}], "errors": []}
    clean = proto.CleanReply.model_validate(answer.body())
    assert clean.journals[0].pending == ["a"]
    refused = proto.Answer.model_validate({"id": 4, "ok": False, "error": "no", "field": "hosts.x.address"})
    assert not refused.ok and refused.field == "hosts.x.address"


def test_a_journal_header_keeps_its_owner_keys():
    h = Header.model_validate({"journal": 1, "pid": 5, "pid_start": 7, "started_unix_s": 1.5, "netns_ino": 9,
                               "netns_cookie": None, "controller": "c", "agent_pid": 5})
    assert h.owner() == {"controller": "c", "agent_pid": 5}
    assert list(h.line()) == ["journal", "pid", "pid_start", "started_unix_s", "netns_ino", "netns_cookie",
                              "controller", "agent_pid"]
