"""The node-labels step: only the agent's four keys, only when they differ, only on its Node."""

from __future__ import annotations

from pytest_mock import MockerFixture
from testutil.unit.nodeagent.nodeagent_fakes import NODE, RecordingWriter, agent_handler, host, sync_state

from pkg.framework.client import NotFoundError
from pkg.nodeagent.internal.handler import NodeLabelsHandler

CURRENT = {
    "gpu.deckhouse.io/baremetal": "true",
    "gpu.deckhouse.io/os.id": "ubuntu",
    "gpu.deckhouse.io/os.version": "22.04",
    "gpu.deckhouse.io/kernel.version": "5.15.0-105-generic",
    "kubernetes.io/hostname": NODE,
}


def test_first_sync_patches_all_four(writer: RecordingWriter, mocker: MockerFixture) -> None:
    state = sync_state(node_labels={"kubernetes.io/hostname": NODE})
    state.host = host()
    agent_handler(mocker, NodeLabelsHandler, writer=writer).handle(state)
    assert writer.calls == [
        ("patch_node_labels", (NODE, {k: v for k, v in CURRENT.items() if k.startswith("gpu.")}))
    ]


def test_no_write_when_the_labels_are_current(writer: RecordingWriter, mocker: MockerFixture) -> None:
    state = sync_state(node_labels=CURRENT)
    state.host = host()
    agent_handler(mocker, NodeLabelsHandler, writer=writer).handle(state)
    assert writer.calls == []
    assert state.writes == 0


def test_changed_and_unreadable_facts_patch_only_their_keys(
    writer: RecordingWriter, mocker: MockerFixture
) -> None:
    state = sync_state(node_labels=CURRENT)
    state.host = host(kernel_release="6.8.0-45-generic", os_version=None, bare_metal=False)
    agent_handler(mocker, NodeLabelsHandler, writer=writer).handle(state)
    assert writer.calls == [
        (
            "patch_node_labels",
            (
                NODE,
                {
                    "gpu.deckhouse.io/baremetal": "false",
                    "gpu.deckhouse.io/os.version": None,
                    "gpu.deckhouse.io/kernel.version": "6.8.0-45-generic",
                },
            ),
        )
    ]


def test_a_missing_node_is_a_recorded_failure(writer: RecordingWriter, mocker: MockerFixture) -> None:
    state = sync_state(with_node=False)
    state.host = host()
    agent_handler(mocker, NodeLabelsHandler, writer=writer).handle(state)
    assert writer.calls == []
    assert [f.subject for f in state.failures] == [f"Node {NODE}"]
    writer.fail_on[f"patch_node_labels:{NODE}"] = NotFoundError(status=404, reason="NotFound", message="gone")
    state = sync_state()
    state.host = host()
    agent_handler(mocker, NodeLabelsHandler, writer=writer).handle(state)
    assert "gone" in str(state.failures[0].error)
