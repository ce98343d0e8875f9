#!/bin/sh
# cco package preremove: the deb prerm and the rpm %preun.
#
# On removal only (deb "remove", rpm "0"), never on upgrade, it undoes what
# cco-install recorded in its receipt, so removing the package leaves the
# machine as it was. It never fails the package operation: a problem is
# reported with the command to finish by hand, and the removal goes on.
set -u

CCO_INSTALL=${CCO_INSTALL:-/usr/bin/cco-install}

case "${1:-}" in
remove | 0) ;;
*) exit 0 ;;
esac

if [ ! -x "$CCO_INSTALL" ]; then
	echo "cco: $CCO_INSTALL is missing; nothing to undo" >&2
	exit 0
fi
# The upgrade timer goes with the rest (--uninstall removes its link); a
# running systemd also stops it now, not at the next boot.
if [ -d /run/systemd/system ] && command -v systemctl >/dev/null; then
	systemctl stop cco-upgrade.timer cco-upgrade.service >/dev/null 2>&1 || true
fi
"$CCO_INSTALL" --uninstall --yes
rc=$?
[ "$rc" -eq 0 ] && exit 0
echo "cco: undoing the installation did not finish (exit $rc); the package is removed anyway." >&2
echo "cco: what is left is listed in /var/lib/cco/receipt.json; reinstall the package and run: sudo cco-install --uninstall" >&2
exit 0
