// Command mkpkg builds cco's binaries and its deb and rpm packages offline
// from the settings in goreleaser.yaml (builds, nfpms, checksum), using the
// nfpm Go module: the packages CI tests are the packages a release ships.
//
//	go run ./packaging/cmd/mkpkg --version 0.1.0 [--arch amd64] [--format deb]
//
// Every file carries SOURCE_DATE_EPOCH (else the last commit's time), so
// two runs of the same checkout produce the same bytes.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"

	"github.com/cco-dev/cco/packaging/release"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }
func (l *listFlag) Set(s string) error {
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			*l = append(*l, p)
		}
	}
	return nil
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("mkpkg", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfgPath := fs.String("config", "goreleaser.yaml", "the goreleaser file to read")
	repo := fs.String("repo", ".", "the checkout to build")
	dist := fs.String("dist", "", "output directory (default: the file's dist under --repo)")
	version := fs.String("version", "", "release version, without the leading v (required)")
	var arches, formats, prebuilt listFlag
	fs.Var(&arches, "arch", "architectures to build, comma-separated (default: all the builds list)")
	fs.Var(&formats, "format", "package formats, comma-separated (default: all the nfpms list)")
	fs.Var(&prebuilt, "prebuilt", "ID=FILE: use FILE instead of compiling build ID (repeatable)")
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "mkpkg: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	o := &release.Options{Repo: *repo, Dist: *dist, Version: *version, Arches: arches, Formats: formats, Log: stderr}
	for _, p := range prebuilt {
		id, file, ok := strings.Cut(p, "=")
		if !ok || id == "" || file == "" {
			fmt.Fprintf(stderr, "mkpkg: --prebuilt %q: want ID=FILE, for example shadow=/tmp/shadow\n", p)
			return 2
		}
		if o.Prebuilt == nil {
			o.Prebuilt = map[string]string{}
		}
		o.Prebuilt[id] = file
	}
	if *version == "" {
		fmt.Fprintln(stderr, "mkpkg: --version is required (for example --version 0.1.0)")
		return 2
	}
	f, err := release.Load(*cfgPath)
	if err != nil {
		fmt.Fprintf(stderr, "mkpkg: %v\n", err)
		return 1
	}
	if o.Epoch, err = release.Epoch(*repo); err != nil {
		fmt.Fprintf(stderr, "mkpkg: %v\n", err)
		return 1
	}
	bins, err := release.BuildBinaries(ctx, f, o)
	if err != nil {
		fmt.Fprintf(stderr, "mkpkg: %v\n", err)
		return 1
	}
	pkgs, err := release.Packages(ctx, f, o)
	if err != nil {
		fmt.Fprintf(stderr, "mkpkg: %v\n", err)
		return 1
	}
	for _, a := range append(bins, pkgs...) {
		fmt.Fprintf(stdout, "%s\t%s\t%s\n", a.Kind, a.Arch, a.Path)
	}
	return 0
}
