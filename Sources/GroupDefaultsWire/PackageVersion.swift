/// The package's version: what every tool's `--version` prints and `GET /v1/limits` reports, and
/// the version `Tools/package` gives the Debian package (it reads it from this line, so this is
/// the one place to change it).
package let packageVersion = "0.3.0"
