// Command mkpkg builds cco's binaries and its deb and rpm packages offline
// from the settings in goreleaser.yaml (builds, nfpms, checksum), using the
// nfpm Go module: the packages CI tests are the packages a release ships.
//
//	go run ./packaging/cmd/mkpkg --version 0.1.0 [--arch amd64] [--format deb]
//	    [--signing-key KEY.asc] [--apt-repo DIR] [--rpm-repo DIR]
//
// --signing-key (or CCO_SIGNING_KEY_FILE; its passphrase in NFPM_PASSPHRASE)
// signs the packages, and --apt-repo and --rpm-repo publish them into signed
// repositories (see package repo for the layouts).
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
	pkgrepo "github.com/cco-dev/cco/packaging/repo"
	"github.com/cco-dev/cco/packaging/signing"
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
	signingKey := fs.String("signing-key", os.Getenv("CCO_SIGNING_KEY_FILE"), "OpenPGP secret key file that signs the packages and repositories (default $CCO_SIGNING_KEY_FILE; passphrase in $NFPM_PASSPHRASE)")
	aptRepo := fs.String("apt-repo", "", "publish the debs into the signed apt repository DIR (created or updated)")
	rpmRepo := fs.String("rpm-repo", "", "publish the rpms into the signed rpm repository DIR (needs createrepo_c)")
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
	o := &release.Options{Repo: *repo, Dist: *dist, Version: *version, Arches: arches, Formats: formats, Log: stderr, SigningKey: *signingKey}
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
	var key *signing.Key
	if *aptRepo != "" || *rpmRepo != "" {
		if *signingKey == "" {
			fmt.Fprintln(stderr, "mkpkg: --apt-repo and --rpm-repo publish signed repositories: give the key with --signing-key FILE (or CCO_SIGNING_KEY_FILE)")
			return 2
		}
		var err error
		if key, err = signing.Load(*signingKey, os.Getenv("NFPM_PASSPHRASE")); err != nil {
			fmt.Fprintf(stderr, "mkpkg: --signing-key: %v\n", err)
			return 1
		}
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
	for _, r := range []struct {
		dir, kind string
		publish   func(context.Context, string, []string, *signing.Key, io.Writer) error
	}{{*aptRepo, "deb", pkgrepo.Apt}, {*rpmRepo, "rpm", pkgrepo.RPM}} {
		if r.dir == "" {
			continue
		}
		var files []string
		for _, a := range pkgs {
			if a.Kind == r.kind {
				files = append(files, a.Path)
			}
		}
		if len(files) == 0 {
			fmt.Fprintf(stderr, "mkpkg: no %s was built to publish into %s (is --format leaving it out?)\n", r.kind, r.dir)
			return 1
		}
		if err := r.publish(ctx, r.dir, files, key, stderr); err != nil {
			fmt.Fprintf(stderr, "mkpkg: %v\n", err)
			return 1
		}
		fmt.Fprintf(stdout, "%s-repo\t\t%s\n", r.kind, r.dir)
	}
	return 0
}
