#!/bin/sh
# Load n non-matching rules into the forward chain of base.nft: each packet
# walks them all, so the SUT's capacity falls. Run by step.toml's setup after
# STEP_AT_S seconds, in the background (its own process group: the teardown
# ends it if the soak ends first).
set -eu
sleep "${STEP_AT_S:-30}"
n=${RULES:-3000}
{
	echo "table inet softnet_step {"
	echo "  chain walk {"
	echo "    type filter hook forward priority filter; policy accept;"
	i=0
	while [ "$i" -lt "$n" ]; do
		echo "    ip saddr 10.$((i / 256 % 256)).$((i % 256)).1 udp dport $((1 + i % 60000)) drop"
		i=$((i + 1))
	done
	echo "  }"
	echo "}"
} | nft -f -
