package deploy_test

import (
	"archive/tar"
	"context"
	"debug/buildinfo"
	"debug/elf"
	"errors"
	"io"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/deploy/image"
	"github.com/floodgate/floodgate/internal/redistest"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

func TestMain(m *testing.M) {
	redistest.Main(m)
	if built.tmp != "" {
		os.RemoveAll(built.tmp)
	}
}

// built is the image the tests share: built once, written as a tarball,
// read back and unpacked.
var built struct {
	once   sync.Once
	err    error
	tmp    string // removed by TestMain
	dir    string // the image's filesystem, unpacked
	size   int64  // the tarball's bytes
	config *v1.ConfigFile
}

// builtImage builds floodgate's image as make image does, writes it as a
// tarball, reads it back and unpacks its filesystem.
func builtImage(t *testing.T) (dir string, cfg *v1.ConfigFile, size int64) {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("the image is linux's: its binary runs only on linux")
	}
	built.once.Do(func() {
		built.tmp, built.err = os.MkdirTemp("", "deploy-image")
		if built.err != nil {
			return
		}
		built.dir = filepath.Join(built.tmp, "rootfs")
		built.size, built.config, built.err = buildAndUnpack(built.tmp, built.dir)
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.dir, built.config, built.size
}

func buildAndUnpack(tmp, rootfs string) (int64, *v1.ConfigFile, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()
	bin := filepath.Join(tmp, "floodgate")
	if err := image.BuildBinary(ctx, "..", runtime.GOARCH, bin); err != nil {
		return 0, nil, err
	}
	img, err := image.Build(image.Options{Binary: bin, Arch: runtime.GOARCH, Version: floodgate.Version})
	if err != nil {
		return 0, nil, err
	}
	path := filepath.Join(tmp, "image.tar")
	if err := tarball.WriteToFile(path, name.MustParseReference("floodgate:test"), img); err != nil {
		return 0, nil, err
	}
	fi, err := os.Stat(path)
	if err != nil {
		return 0, nil, err
	}
	back, err := tarball.ImageFromPath(path, nil)
	if err != nil {
		return 0, nil, err
	}
	cfg, err := back.ConfigFile()
	if err != nil {
		return 0, nil, err
	}
	return fi.Size(), cfg, untar(mutate.Extract(back), rootfs)
}

// untar writes the regular files and directories of the tar r under dir.
func untar(r io.ReadCloser, dir string) error {
	defer r.Close()
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		path := filepath.Join(dir, filepath.Clean("/"+h.Name))
		switch h.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(path, 0o755)
		case tar.TypeReg:
			err = writeFile(path, tr, h.FileInfo().Mode().Perm())
		}
		if err != nil {
			return err
		}
	}
}

func writeFile(path string, r io.Reader, mode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// imageBinary is the floodgate binary of the image's filesystem.
func imageBinary(t *testing.T) string {
	dir, _, _ := builtImage(t)
	return filepath.Join(dir, image.Binary)
}

func TestImageRunsVersion(t *testing.T) {
	dir, cfg, size := builtImage(t)
	t.Logf("image tarball: %d bytes", size)
	bin := filepath.Join(dir, image.Binary)
	out, err := exec.Command(bin, "version").CombinedOutput()
	if err != nil {
		t.Fatalf("%s version: %v\n%s", bin, err, out)
	}
	t.Logf("floodgate version from the image: %s", out)
	if !regexp.MustCompile(`^floodgate \S+ .*go1\.\d+`).Match(out) {
		t.Errorf("floodgate version printed %q, want floodgate VERSION ... goVERSION", out)
	}
	assertStatic(t, bin)
	if _, err := os.Stat(filepath.Join(dir, image.StateDir)); err != nil {
		t.Errorf("the image has no state directory: %v", err)
	}
	if !slices.Equal(cfg.Config.Entrypoint, []string{image.Binary}) {
		t.Errorf("entrypoint %q, want [%s]", cfg.Config.Entrypoint, image.Binary)
	}
	if !slices.Equal(cfg.Config.Cmd, image.DefaultArgs) {
		t.Errorf("cmd %q, want %q", cfg.Config.Cmd, image.DefaultArgs)
	}
	assertNonRoot(t, "the image's config", cfg.Config.User)
	if cfg.OS != "linux" || cfg.Architecture != runtime.GOARCH {
		t.Errorf("platform %s/%s, want linux/%s", cfg.OS, cfg.Architecture, runtime.GOARCH)
	}
}

// assertStatic fails t unless bin is an ELF executable with no
// interpreter and no shared libraries.
func assertStatic(t *testing.T, bin string) {
	t.Helper()
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatalf("the image's binary: %v", err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("the image's binary asks for a dynamic loader: it is not static")
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		t.Errorf("the image's binary needs shared libraries %q", libs)
	}
}

// assertNonRoot fails t unless user is a numeric uid (and gid) other than 0.
func assertNonRoot(t *testing.T, what, user string) {
	t.Helper()
	if !regexp.MustCompile(`^[1-9][0-9]*(:[1-9][0-9]*)?$`).MatchString(user) {
		t.Errorf("%s runs as user %q, want a numeric non-root uid[:gid]", what, user)
	}
}

// TestImageServes runs the image's entrypoint and arguments as the image
// gives them, only moved to free loopback ports and a temporary snapshot
// (later flags win), and asks it /readyz.
func TestImageServes(t *testing.T) {
	_, cfg, _ := builtImage(t)
	args := append(slices.Clone(cfg.Config.Cmd),
		"--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0", "--metrics", "127.0.0.1:0",
		"--snapshot", filepath.Join(t.TempDir(), "serve.snapshot"))
	addrs := startServe(t, imageBinary(t), args)
	assertGet(t, "http://"+addrs["metrics"]+"/readyz", 200)
}

func TestDockerfile(t *testing.T) {
	data, err := os.ReadFile("Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	build := regexp.MustCompile(`(?m)^RUN CGO_ENABLED=0 go build .*-o (\S+) \./cmd/floodgate$`).FindStringSubmatch(text)
	if build == nil {
		t.Fatal("the Dockerfile does not build ./cmd/floodgate with CGO_ENABLED=0")
	}
	if !strings.Contains(text, "COPY --from=build "+build[1]+" "+image.Binary+"\n") {
		t.Errorf("the Dockerfile does not copy %s to %s", build[1], image.Binary)
	}
	if !regexp.MustCompile(`(?m)^FROM (scratch|gcr\.io/distroless/static\S*)$`).MatchString(text) {
		t.Errorf("the Dockerfile's last stage is not scratch or distroless static")
	}
	for _, from := range regexp.MustCompile(`(?m)^FROM (\S+)`).FindAllStringSubmatch(text, -1) {
		if from[1] != "scratch" && !regexp.MustCompile(`@sha256:[0-9a-f]{64}$`).MatchString(from[1]) {
			t.Errorf("the Dockerfile's base image %s is not pinned by digest (@sha256:...)", from[1])
		}
	}
	if copies := regexp.MustCompile(`(?m)^COPY --from=build /etc/.*$`).FindAllString(text, -1); copies != nil {
		t.Errorf("the Dockerfile copies the build stage's files into the image: %q", copies)
	}
	users := regexp.MustCompile(`(?m)^USER (\S+)$`).FindAllStringSubmatch(text, -1)
	if len(users) != 1 || users[0][1] != image.User {
		t.Errorf("the Dockerfile's USER lines %q, want one, USER %s", users, image.User)
	}
	if got, want := dockerfileLabels(text), image.Labels("${VERSION}"); !maps.Equal(got, want) {
		t.Errorf("the Dockerfile's labels %q, want %q (as make image's image has them, the version from the build argument)", got, want)
	}
	if !regexp.MustCompile(`(?m)^FROM scratch\nARG VERSION(=\S*)?$`).MatchString(text) {
		t.Errorf("the Dockerfile's last stage does not begin with ARG VERSION, which its version label uses")
	}
	wantEntry := `ENTRYPOINT ["` + image.Binary + `"]`
	wantCmd := `CMD ["` + strings.Join(image.DefaultArgs, `", "`) + `"]`
	for _, want := range []string{wantEntry, wantCmd} {
		if !strings.Contains(text, "\n"+want+"\n") {
			t.Errorf("the Dockerfile lacks %s (as make image's image has it)", want)
		}
	}
}

// dockerfileLabels are the key="value" pairs of text's LABEL instructions.
func dockerfileLabels(text string) map[string]string {
	text = strings.ReplaceAll(text, "\\\n", " ")
	labels := map[string]string{}
	for _, line := range regexp.MustCompile(`(?m)^LABEL (.*)$`).FindAllStringSubmatch(text, -1) {
		for _, kv := range regexp.MustCompile(`(\S+)="([^"]*)"`).FindAllStringSubmatch(line[1], -1) {
			labels[kv[1]] = kv[2]
		}
	}
	return labels
}

// The image make image builds names floodgate's release and license.
func TestImageLabels(t *testing.T) {
	_, cfg, _ := builtImage(t)
	if got, want := cfg.Config.Labels, image.Labels(floodgate.Version); !maps.Equal(got, want) {
		t.Errorf("the image's labels %q, want %q", got, want)
	}
}

// make -s version, the Dockerfile's VERSION build argument, prints
// floodgate.Version.
func TestMakeVersion(t *testing.T) {
	out, err := exec.Command("make", "-s", "--no-print-directory", "-C", "..", "version").Output()
	if got := strings.TrimSpace(string(out)); err != nil || got != floodgate.Version {
		t.Errorf("make -s version: %v %q, want %q", err, got, floodgate.Version)
	}
}

// TestImageFilesAreItsOwn checks that the image holds floodgate's files
// and nothing else, nothing of the host that built it (a CA bundle, say),
// so that every host builds the same image from the same binary.
func TestImageFilesAreItsOwn(t *testing.T) {
	dir, _, _ := builtImage(t)
	var got []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(dir, path)
			got = append(got, "/"+rel)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"/etc/group", "/etc/passwd", image.Binary}
	if !slices.Equal(got, want) {
		t.Errorf("the image's files %q, want %q", got, want)
	}
}

// TestImageCARoots checks that the image's binary carries the CA roots of
// the module golang.org/x/crypto/x509roots/fallback, at the version the
// root go.mod pins, for TLS (rediss://) on an image with no CA file.
func TestImageCARoots(t *testing.T) {
	const roots = "golang.org/x/crypto/x509roots/fallback"
	info, err := buildinfo.ReadFile(imageBinary(t))
	if err != nil {
		t.Fatal(err)
	}
	want := regexp.MustCompile(`(?m)^\s+` + regexp.QuoteMeta(roots) + ` (\S+)`).FindSubmatch(mustRead(t, "../go.mod"))
	if want == nil {
		t.Fatalf("../go.mod does not require %s", roots)
	}
	for _, m := range info.Deps {
		if m.Path == roots {
			if m.Version != string(want[1]) {
				t.Errorf("the binary has %s %s, go.mod pins %s", roots, m.Version, want[1])
			}
			return
		}
	}
	t.Errorf("the image's binary does not import %s: it has no CA roots", roots)
}
