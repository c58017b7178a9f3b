import pytest

from podsim.errors import InputError
from podsim.units import format_ns, parse_bandwidth, parse_message_size, parse_size, parse_time_ns


def test_sizes_distinguish_decimal_and_binary_prefixes():
    assert parse_size("1 MiB") == 1048576
    assert parse_size("1 MB") == 1000000
    assert parse_size("2GiB") == 2 * 2**30
    assert parse_size(512) == 512


def test_bandwidth_units_to_bytes_per_ns():
    assert parse_bandwidth("400 GB/s") == pytest.approx(400.0)
    assert parse_bandwidth("200 Gbps") == pytest.approx(25.0)  # bits
    assert parse_bandwidth("200 Gb/s") == pytest.approx(25.0)
    assert parse_bandwidth("50 GiB/s") == pytest.approx(50 * 2**30 / 1e9)
    assert parse_bandwidth("1.6 TB/s") == pytest.approx(1600.0)


def test_times():
    assert parse_time_ns("1.5 us") == 1500
    assert parse_time_ns("2 ms") == 2_000_000
    assert parse_time_ns(936) == 936
    assert format_ns(117780) == "117.78 us"


@pytest.mark.parametrize("bad", ["0 GB/s", "-5 GB/s", "fast", "10 parsecs"])
def test_bad_bandwidth(bad):
    with pytest.raises(InputError):
        parse_bandwidth(bad)


def test_message_sizes_read_as_nccl_tests_reads_them() -> None:
    # nccl-tests' -b 1K -e 4G are binary; a size with a unit is what the unit says
    assert parse_message_size("1K") == 1024
    assert parse_message_size("4M") == 4 * 2**20
    assert parse_message_size(" 1.5G ") == 3 * 2**29
    assert parse_message_size("16 MB") == 16_000_000
    assert parse_message_size(128) == 128
    with pytest.raises(InputError):
        parse_message_size("4Q")
