import pytest

from softnet.errors import InputError
from softnet.units import bits_per_second, parse_rate


@pytest.mark.parametrize("text, pps", [("200kpps", 200e3), ("1.5Mpps", 1.5e6), ("1000", 1000), ("10 pps", 10),
                                       ("2e3pps", 2000)])
def test_packet_rates(text, pps):
    assert parse_rate(text, 64) == pytest.approx(pps)


def test_bit_rates_on_l1_and_l2():
    # 10 GbE line rate at 64 B is the familiar 14.88 Mpps (L1: 64 + 20 B per frame).
    assert parse_rate("10Gbps", 64, "l1") == pytest.approx(14_880_952.4, rel=1e-6)
    assert parse_rate("10Gbps", 64, "l2") == pytest.approx(10e9 / 512)
    assert parse_rate("100Mbps", 1518, "l2") == pytest.approx(100e6 / (1518 * 8))
    assert bits_per_second(parse_rate("1Gbps", 128, "l1"), 128, "l1") == pytest.approx(1e9)


@pytest.mark.parametrize("text", ["-1kpps", "0", "fast", "1 parsec", "1e12pps"])
def test_bad_rates_name_the_option(text):
    with pytest.raises(InputError, match="--rate"):
        parse_rate(text, 64)
