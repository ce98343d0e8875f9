#!/bin/sh
# cco package postinstall: the deb postinst and the rpm %post.
#
# A package install must work offline, so this never downloads:
#   - on upgrade of a provisioned machine (a receipt exists), it refreshes the
#     installed shadow copies and the egress proxy from the new package with
#     the vendor steps skipped (CCO_AGENTS empty);
#   - on a first install with a bundle configured (the "bundle" key of
#     /etc/cco/install.toml or CCO_BUNDLE), it installs from that bundle;
#   - otherwise it prints the command that provisions the machine.
# It never fails the package operation: a provisioning problem is reported
# with the command to fix it, and the package stays installed.
set -u

CCO_INSTALL=${CCO_INSTALL:-/usr/bin/cco-install}
# CCO_INSTALL and CCO_RECEIPT exist for the package tests.
RECEIPT=${CCO_RECEIPT:-/var/lib/cco/receipt.json}

# deb: postinst configure [old-version]; rpm: %post N (1 install, 2+ upgrade).
mode=install
case "${1:-}" in
configure)
	[ -n "${2:-}" ] && mode=upgrade
	;;
abort-upgrade | abort-remove | abort-deconfigure)
	exit 0
	;;
[0-9]*)
	[ "$1" -ge 2 ] && mode=upgrade
	;;
esac

report() {
	echo "cco: $*" >&2
}

if [ "$mode" = upgrade ] && [ -f "$RECEIPT" ]; then
	report "refreshing the installed shadow and egress proxy from the new package (offline, vendor steps skipped)"
	CCO_AGENTS= "$CCO_INSTALL" --yes
	rc=$?
	[ "$rc" -eq 0 ] && exit 0
	report "the refresh did not finish (exit $rc); the previous copies are still in place."
	report "fix what it reported above, then run: sudo cco-install"
	exit 0
fi

bundle=$("$CCO_INSTALL" config 2>/dev/null | sed -n 's/^bundle = "\(..*\)"  #.*/\1/p')
if [ -n "$bundle" ]; then
	report "installing from the configured bundle $bundle"
	"$CCO_INSTALL" --yes --bundle "$bundle"
	rc=$?
	[ "$rc" -eq 0 ] && exit 0
	report "installing from $bundle did not finish (exit $rc); fix what it reported above, then run: sudo cco-install --bundle $bundle"
	exit 0
fi

if [ "$mode" = install ]; then
	report "installed. To jail the agents on this machine, run: sudo cco-install"
fi
exit 0
