package floodgate

// Version is floodgate's release, spelled as its git tag. The command's
// `floodgate version`, the service's floodgate_build_info metric and the
// container image's org.opencontainers.image.version label all report it.
// Between releases it names the next release with a "-dev" suffix.
// CHANGELOG.md lists what each release changed.
const Version = "v0.2.0-dev"
