#!/bin/sh
# wire_stats of the program attached to SN_IN, summed over CPUs, as the JSON
# object of integers softnet reads before and after each trial.
set -eu
prog=$(ip -j link show dev "$SN_IN" | jq -r '.[0].xdp.prog.id // empty')
[ -n "$prog" ] || { echo "no XDP program on $SN_IN" >&2; exit 1; }
for map in $(bpftool -j prog show id "$prog" | jq -r '.map_ids[]'); do
	if [ "$(bpftool -j map show id "$map" | jq -r .name)" = wire_stats ]; then
		bpftool -j map dump id "$map" | jq -c '
			map({key: .formatted.key, n: ([.formatted.values[].value] | add)})
			| {xdp_redirected: (.[] | select(.key == 0) | .n), xdp_passed: (.[] | select(.key == 1) | .n)}'
		exit 0
	fi
done
echo "program $prog has no wire_stats map" >&2
exit 1
