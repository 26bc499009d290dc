// Command mkimage builds floodgate's container image without a Docker
// daemon (see package image): from the repository's root,
//
//	cd deploy && go run ./cmd/mkimage -root .. -tar ../floodgate-image.tar
//
// (make image does this) writes a tarball that `docker load -i` and
// `podman load -i` read, tagged floodgate:latest; -layout DIR writes an OCI
// image layout instead (or as well), for crane, skopeo or containerd.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/deploy/image"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "mkimage:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("mkimage", flag.ContinueOnError)
	root := fs.String("root", "..", "the floodgate repository's root")
	arch := fs.String("arch", runtime.GOARCH, "the image's architecture (GOARCH)")
	tarPath := fs.String("tar", "", "write the image as a tarball for docker load / podman load")
	layoutDir := fs.String("layout", "", "write the image as an OCI image layout in this directory")
	tag := fs.String("tag", "floodgate:latest", "the tarball's tag")
	version := fs.String("version", floodgate.Version, "the image's org.opencontainers.image.version label")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *tarPath == "" && *layoutDir == "" {
		return errors.New("give -tar FILE or -layout DIR")
	}
	tmp, err := os.MkdirTemp("", "mkimage")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	bin := filepath.Join(tmp, "floodgate")
	if err := image.BuildBinary(context.Background(), *root, *arch, bin); err != nil {
		return err
	}
	img, err := image.Build(image.Options{Binary: bin, Arch: *arch, Version: *version})
	if err != nil {
		return err
	}
	if *tarPath != "" {
		ref, err := name.NewTag(*tag)
		if err != nil {
			return fmt.Errorf("-tag: %w", err)
		}
		if err := tarball.WriteToFile(*tarPath, ref, img); err != nil {
			return fmt.Errorf("writing %s: %w", *tarPath, err)
		}
		fmt.Println("mkimage: wrote", *tarPath, "tagged", ref.String())
	}
	if *layoutDir != "" {
		p, err := layout.Write(*layoutDir, empty.Index)
		if err != nil {
			return fmt.Errorf("writing %s: %w", *layoutDir, err)
		}
		if err := p.AppendImage(img); err != nil {
			return fmt.Errorf("writing %s: %w", *layoutDir, err)
		}
		fmt.Println("mkimage: wrote the OCI layout", *layoutDir)
	}
	return nil
}
