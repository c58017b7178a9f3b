"""Chakra ET reading and writing, checked against bytes laid out by hand from the schema."""

import gzip

import pytest

from podsim.errors import InputError
from podsim.formats.chakra import (
    GlobalMetadata,
    Node,
    NodeType,
    read_trace,
    read_workload,
    wire,
    write_trace,
    write_workload,
)
from podsim.workload import CollectiveKind, OpKind, ProgramBuilder, Workload

# ASTRA-sim's all_reduce.0.et microbenchmark, byte for byte as documented in the reference
# notes: metadata "0.0.4", then one COMM_COLL node with is_cpu_op=false (bool), comm_type=0
# and comm_size=1048576 (int64).
ALL_REDUCE_0 = bytes.fromhex(
    "07"
    "0a05302e302e34"
    "48"
    "1214" + "all_reduce_8npus_1MB".encode().hex() + "1807"
    "520e"
    "0a09" + "is_cpu_op".encode().hex() + "d80100"
    "520d"
    "0a09" + "comm_type".encode().hex() + "4800"
    "520f"
    "0a09" + "comm_size".encode().hex() + "48808040"
)


def test_reads_hand_laid_bytes(tmp_path):
    # 1 + 7 bytes of metadata, then a 72-byte (0x48) node: 81 bytes in all
    assert len(ALL_REDUCE_0) == 81
    p = tmp_path / "x.0.et"
    p.write_bytes(ALL_REDUCE_0)
    tr = read_trace(p)
    assert tr.metadata.version == "0.0.4"
    (nd,) = tr.nodes
    assert nd.id == 0 and nd.type == NodeType.COMM_COLL_NODE
    assert nd.attr("is_cpu_op") is False
    assert nd.attr("comm_type") == 0
    assert nd.attr("comm_size") == 1048576


def test_gzip_is_detected(tmp_path):
    p = tmp_path / "x.0.et"
    p.write_bytes(gzip.compress(ALL_REDUCE_0))
    assert read_trace(p).nodes[0].attr("comm_size") == 1048576


@pytest.mark.parametrize(
    "atype", ["int32", "int64", "uint32", "uint64", "sint32", "sint64", "fixed32", "fixed64", "sfixed32", "sfixed64"]
)
def test_any_integer_type_for_comm_size(tmp_path, atype):
    nd = Node(id=7, name="ar", type=NodeType.COMM_COLL_NODE)
    nd.set_attr("comm_type", 0, "uint64")
    nd.set_attr("comm_size", 4096, atype)
    prefix = tmp_path / "w"
    write_trace(f"{prefix}.0.et", [nd])
    write_trace(f"{prefix}.1.et", [nd])
    wl = read_workload(prefix)
    p = wl.program_of(0)
    assert int(p.size_bytes[0]) == 4096
    assert int(p.collective[0]) == CollectiveKind.ALL_REDUCE


def test_negative_int32_and_sint64_roundtrip(tmp_path):
    nd = Node(id=1, type=NodeType.COMP_NODE)
    nd.set_attr("a", -5, "int32")
    nd.set_attr("b", -(2**40), "sint64")
    nd.set_attr("c", [True, False, True], "bool_list")
    nd.set_attr("d", 2.5, "double")
    write_trace(tmp_path / "t.et", [nd])
    back = read_trace(tmp_path / "t.et").nodes[0]
    assert back.attr("a") == -5 and back.attr("b") == -(2**40)
    assert back.attr("c") == [True, False, True] and back.attr("d") == 2.5


def test_varint_encoding_matches_protobuf_examples():
    # protobuf documentation: 150 -> 96 01; 300 -> ac 02; 1 -> 01
    assert wire.encode_varint(150) == b"\x96\x01"
    assert wire.encode_varint(300) == b"\xac\x02"
    assert wire.read_varint(b"\xac\x02", 0) == (300, 2)


def test_workload_roundtrip_keeps_everything(tmp_path):
    b = ProgramBuilder("p")
    c = b.add(OpKind.COMPUTE, "gemm", duration_ns=5000, node_id=10, flops=1e9, size_bytes=4096)
    a = b.add(
        OpKind.COLLECTIVE,
        "ar",
        data_deps=[c],
        collective=int(CollectiveKind.ALL_GATHER),
        size_bytes=1 << 20,
        node_id=11,
        group="1",
        priority=3,
    )
    b.add(OpKind.MEM_LOAD, "ld", data_deps=[a], size_bytes=123, node_id=12)
    wl = Workload([b.build()], [0, 0])
    write_workload(wl, tmp_path / "w")
    back = read_workload(tmp_path / "w")
    p = back.program_of(1)
    assert list(p.node_id) == [10, 11, 12]
    assert list(p.kind) == [OpKind.COMPUTE, OpKind.COLLECTIVE, OpKind.MEM_LOAD]
    assert int(p.duration_ns[0]) == 5000 and float(p.flops[0]) == 1e9
    assert p.group_keys == ["1"] and int(p.priority[1]) == 3
    assert list(p.data_deps(2)) == [1]


def test_duration_micros_become_ns(tmp_path):
    nd = Node(id=1, type=NodeType.COMP_NODE, duration_micros=7)
    write_trace(tmp_path / "w.0.et", [nd])
    assert int(read_workload(tmp_path / "w").program_of(0).duration_ns[0]) == 7000


# --------------------------------------------------------------------------- bad input


def _one(tmp_path, nodes):
    write_trace(tmp_path / "w.0.et", nodes)
    return tmp_path / "w"


def test_truncated_file_names_file_and_offset(tmp_path):
    p = tmp_path / "w.0.et"
    p.write_bytes(ALL_REDUCE_0[:-7])
    with pytest.raises(InputError, match=r"w\.0\.et.*truncated"):
        read_workload(tmp_path / "w")


def test_garbled_file(tmp_path):
    p = tmp_path / "w.0.et"
    p.write_bytes(b"\x05\x0f\xff\xff\xff\xff")
    with pytest.raises(InputError, match="garbled|truncated"):
        read_trace(p)


def test_missing_rank_file(tmp_path):
    nd = Node(id=1, type=NodeType.COMP_NODE, duration_micros=1)
    write_trace(tmp_path / "w.0.et", [nd])
    write_trace(tmp_path / "w.2.et", [nd])
    with pytest.raises(InputError, match=r"w\.1\.et.*missing"):
        read_workload(tmp_path / "w")
    with pytest.raises(InputError, match=r"w\.1\.et"):
        read_workload(tmp_path / "w", num_ranks=3)


def test_dependency_on_missing_node(tmp_path):
    nd = Node(id=1, type=NodeType.COMP_NODE, duration_micros=1, data_deps=[99])
    with pytest.raises(InputError, match="node 1.*node 99"):
        read_workload(_one(tmp_path, [nd]))


def test_cycle_is_named(tmp_path):
    a = Node(id=1, type=NodeType.COMP_NODE, duration_micros=1, data_deps=[3])
    b = Node(id=2, type=NodeType.COMP_NODE, duration_micros=1, data_deps=[1])
    c = Node(id=3, type=NodeType.COMP_NODE, duration_micros=1, data_deps=[2])
    with pytest.raises(InputError, match="cycle among nodes"):
        read_workload(_one(tmp_path, [a, b, c]))


@pytest.mark.parametrize("size", [-1, 1 << 60])
def test_negative_or_absurd_sizes(tmp_path, size):
    nd = Node(id=1, type=NodeType.COMM_COLL_NODE)
    nd.set_attr("comm_type", 0, "int64")
    nd.set_attr("comm_size", size, "int64")
    with pytest.raises(InputError, match="comm_size"):
        read_workload(_one(tmp_path, [nd]))


def test_string_where_integer_expected(tmp_path):
    nd = Node(id=1, type=NodeType.COMM_COLL_NODE)
    nd.set_attr("comm_type", 0, "int64")
    nd.set_attr("comm_size", "lots", "string")
    with pytest.raises(InputError, match="comm_size.*integer"):
        read_workload(_one(tmp_path, [nd]))


def test_metadata_only_file_is_an_empty_program(tmp_path):
    write_trace(tmp_path / "w.0.et", [], GlobalMetadata(version="0.0.4"))
    assert len(read_workload(tmp_path / "w").program_of(0)) == 0
