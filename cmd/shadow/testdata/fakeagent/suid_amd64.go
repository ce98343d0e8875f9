package main

import "golang.org/x/sys/unix"

// legacyCalls are the calls amd64 keeps beside their *at forms.
func legacyCalls() []suidCall {
	return []suidCall{
		{"chmod", false, func(p string, m uint32) error {
			_, err := sys(unix.SYS_CHMOD, cstr(p), uintptr(m))
			return err
		}},
		{"open", true, func(p string, m uint32) error {
			return closing(sys(unix.SYS_OPEN, cstr(p), unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY, uintptr(m)))
		}},
		{"creat", true, func(p string, m uint32) error { return closing(sys(unix.SYS_CREAT, cstr(p), uintptr(m))) }},
		{"mknod", true, func(p string, m uint32) error {
			_, err := sys(unix.SYS_MKNOD, cstr(p), uintptr(unix.S_IFREG|m), 0)
			return err
		}},
		{"mkdir", true, func(p string, m uint32) error {
			_, err := sys(unix.SYS_MKDIR, cstr(p), uintptr(m))
			return err
		}},
	}
}
