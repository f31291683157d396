/// `name` as a tool prints it: a control character written as an escape, so that a name cannot
/// print as another line (accounts made before names were checked may hold one).
package func printable(_ name: String) -> String {
    String(
        name.unicodeScalars.flatMap { scalar -> [Character] in
            scalar.properties.generalCategory == .control ? Array(scalar.escaped(asASCII: true)) : [Character(scalar)]
        }
    )
}
