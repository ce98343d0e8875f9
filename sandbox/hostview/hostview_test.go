package hostview

import (
	"reflect"
	"testing"
)

func host(v2 bool, cgroup string) Host {
	return Host{
		Exists: func(string) bool { return true },
		FSType: func(p string) int64 {
			switch {
			case v2 && p == cgroupRoot:
				return cgroup2Magic
			case !v2 && (p == "/sys/fs/cgroup/memory" || p == "/sys/fs/cgroup/cpu,cpuacct"):
				return cgroupMagic
			}
			return 0
		},
		Cgroup: cgroup,
	}
}

func TestSys(t *testing.T) {
	net := []string{"/sys/class/net", "/sys/devices/virtual/net"}
	for _, tc := range []struct {
		name  string
		h     Host
		masks []string
		binds [][2]string
	}{
		{"v2", host(true, "0::/user.slice/session-1.scope\n"), net,
			[][2]string{{"/sys/fs/cgroup/user.slice/session-1.scope", "/sys/fs/cgroup"}}},
		{"v2 at the root", host(true, "0::/\n"), append(net, "/sys/fs/cgroup"), nil},
		{"v1", host(false, "9:name=systemd:/x\n5:memory:/process_api/abc\n3:cpu,cpuacct:/process_api/abc\n2:pids:/p\n0::/\n"),
			append(net, "/sys/fs/cgroup"), [][2]string{
				{"/sys/fs/cgroup/cpu,cpuacct/process_api/abc", "/sys/fs/cgroup/cpu,cpuacct"},
				{"/sys/fs/cgroup/memory/process_api/abc", "/sys/fs/cgroup/memory"}}},
		{"v1 at the roots", host(false, "5:memory:/\n3:cpu,cpuacct:/\n"), append(net, "/sys/fs/cgroup"), nil},
	} {
		v := Sys(tc.h)
		if !reflect.DeepEqual(v.Masks, tc.masks) || !reflect.DeepEqual(v.Binds, tc.binds) {
			t.Errorf("%s: masks %q binds %q, want %q %q", tc.name, v.Masks, v.Binds, tc.masks, tc.binds)
		}
	}
}

func TestOtherHomes(t *testing.T) {
	passwd := `root:x:0:0:root:/root:/bin/bash
daemon:x:1:1::/usr/sbin:/usr/sbin/nologin
ada:x:1000:1000::/home/ada:/bin/bash
bob:x:1001:1001::/home/bob:/bin/zsh
svc:x:1002:1002::/srv/svc:/usr/sbin/nologin
nobody:x:65534:65534::/nonexistent:/usr/sbin/nologin
eve:x:1003:1003::/home/bob:/bin/bash
#carol:x:1004:1004::/home/carol:/bin/bash
root2:x:1005:1005::/:/bin/bash`
	if got := OtherHomes(passwd, "/home/ada"); !reflect.DeepEqual(got, []string{"/home/bob"}) {
		t.Errorf("OtherHomes = %q, want only bob's", got)
	}
}
