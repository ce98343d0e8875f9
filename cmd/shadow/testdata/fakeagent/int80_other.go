//go:build !amd64

package main

func int80() { panic("int 0x80 exists only on amd64") }
