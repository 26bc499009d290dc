// Package image builds floodgate's container image without a Docker
// daemon: a static floodgate binary (cross-built with CGO_ENABLED=0) on an
// empty base, an /etc/passwd naming the non-root user 65532, and a
// writable /var/lib/floodgate owned by that user for the memory store's
// snapshot. It has no CA certificate file: the binary carries the roots
// of golang.org/x/crypto/x509roots/fallback, a module its go.mod pins, and
// crypto/x509 uses them where the system has none. Nothing in the image
// comes from the host that builds it.
//
// The image runs `/floodgate serve` listening on every interface of the
// container (DefaultArgs), as user 65532:65532. Its layer and config carry
// fixed times (the Unix epoch), so the same binary gives the same image.
//
// deploy/cmd/mkimage (make image) writes it as a tarball that `docker load`
// and `podman load` read, or as an OCI image layout that crane, skopeo and
// containerd push or import.
package image

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The image's user, binary and state directory.
const (
	User     = "65532:65532"
	Binary   = "/floodgate"
	StateDir = "/var/lib/floodgate"
)

// DefaultArgs are the image's arguments after its entrypoint (Binary):
// serve on every interface of the container, on floodgate's usual ports,
// keeping the memory store's snapshot in StateDir (mount a volume there to
// keep it across restarts; give --snapshot off for none). The Dockerfile
// beside this package says the same.
var DefaultArgs = []string{
	"serve",
	"--http", ":8080",
	"--grpc", ":8081",
	"--metrics", ":6070",
	"--snapshot", StateDir + "/serve.snapshot",
}

// ExposedPorts are the ports DefaultArgs listen on.
var ExposedPorts = []string{"8080/tcp", "8081/tcp", "6070/tcp"}

// ErrNoBinary is returned by Build when Options.Binary is empty.
var ErrNoBinary = errors.New("image: no binary given")

// Options are Build's settings.
type Options struct {
	// Binary is the floodgate binary to put in the image, built static
	// for Arch (see BuildBinary).
	Binary string
	// Arch is the image's architecture (GOARCH), "amd64" or "arm64".
	Arch string
	// Version is the image's org.opencontainers.image.version label,
	// floodgate.Version for a build of this tree.
	Version string
}

// Labels are the image's OCI annotations for floodgate's release version.
// The Dockerfile beside this package sets the same, its version from the
// build argument VERSION (`make -s version` prints floodgate.Version).
func Labels(version string) map[string]string {
	return map[string]string{
		"org.opencontainers.image.title":    "floodgate",
		"org.opencontainers.image.source":   "https://github.com/floodgate/floodgate",
		"org.opencontainers.image.licenses": "Apache-2.0",
		"org.opencontainers.image.version":  version,
	}
}

// BuildBinary cross-builds ./cmd/floodgate of the module in root for
// linux/arch, static (CGO_ENABLED=0, trimmed paths), into out, with the
// commit in its build information when root is a git work tree.
func BuildBinary(ctx context.Context, root, arch, out string) error {
	cmd := exec.CommandContext(ctx, goCommand(), "build", "-trimpath", "-buildvcs=auto", "-ldflags=-s -w", "-o", out, "./cmd/floodgate")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch)
	if msg, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("image: building floodgate for linux/%s: %w\n%s", arch, err, msg)
	}
	return nil
}

// goCommand is the go command of $GOROOT (make sets it), else go on PATH.
func goCommand() string {
	if p := filepath.Join(os.Getenv("GOROOT"), "bin", "go"); os.Getenv("GOROOT") != "" {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return "go"
}

// Build returns the image of o.Binary.
func Build(o Options) (v1.Image, error) {
	if o.Binary == "" {
		return nil, ErrNoBinary
	}
	layer, err := fileLayer(o)
	if err != nil {
		return nil, err
	}
	img, err := mutate.AppendLayers(mutate.MediaType(empty.Image, types.OCIManifestSchema1), layer)
	if err != nil {
		return nil, fmt.Errorf("image: adding the layer: %w", err)
	}
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("image: reading the config: %w", err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", o.Arch
	cf.Created = v1.Time{Time: time.Unix(0, 0).UTC()}
	cf.Config = imageConfig(o.Version)
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, fmt.Errorf("image: writing the config: %w", err)
	}
	return img, nil
}

// imageConfig is how the image of floodgate's release version runs.
func imageConfig(version string) v1.Config {
	ports := make(map[string]struct{}, len(ExposedPorts))
	for _, p := range ExposedPorts {
		ports[p] = struct{}{}
	}
	return v1.Config{
		Entrypoint:   []string{Binary},
		Cmd:          DefaultArgs,
		User:         User,
		WorkingDir:   StateDir,
		Env:          []string{"PATH=/"},
		ExposedPorts: ports,
		Labels:       Labels(version),
	}
}

// fileLayer is the image's one layer: the binary, the user and the state
// directory.
func fileLayer(o Options) (v1.Layer, error) {
	bin, err := os.ReadFile(o.Binary)
	if err != nil {
		return nil, fmt.Errorf("image: reading the binary: %w", err)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	entries := []tarEntry{
		{name: "etc/", dir: true, mode: 0o755},
		{name: "etc/passwd", mode: 0o644, data: []byte("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/var/lib/floodgate:/sbin/nologin\n")},
		{name: "etc/group", mode: 0o644, data: []byte("root:x:0:\nnonroot:x:65532:\n")},
		{name: "floodgate", mode: 0o755, data: bin},
		{name: "tmp/", dir: true, mode: 0o1777},
		{name: "var/", dir: true, mode: 0o755},
		{name: "var/lib/", dir: true, mode: 0o755},
		{name: "var/lib/floodgate/", dir: true, mode: 0o700, owner: 65532},
	}
	for _, e := range entries {
		if err := e.write(tw); err != nil {
			return nil, fmt.Errorf("image: writing the layer: %w", err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("image: writing the layer: %w", err)
	}
	data := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	}, tarball.WithMediaType(types.OCILayer))
}

// tarEntry is a file or directory of the layer.
type tarEntry struct {
	name  string
	dir   bool
	mode  int64
	owner int // uid and gid
	data  []byte
}

func (e tarEntry) write(tw *tar.Writer) error {
	h := &tar.Header{
		Name: e.name, Mode: e.mode, Uid: e.owner, Gid: e.owner,
		ModTime: time.Unix(0, 0), Format: tar.FormatPAX,
		Typeflag: tar.TypeReg, Size: int64(len(e.data)),
	}
	if e.dir {
		h.Typeflag, h.Size = tar.TypeDir, 0
	}
	if err := tw.WriteHeader(h); err != nil {
		return err
	}
	_, err := tw.Write(e.data)
	return err
}
