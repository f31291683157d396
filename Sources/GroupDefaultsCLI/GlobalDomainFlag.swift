import GroupDefaults

/// `-g` (or `-globalDomain`) where a verb's SUITE goes names the global domain, as in macOS
/// `defaults read -g`: `groupdefaults write -g key value`.
enum GlobalDomainFlag {
    /// The options that take a value, which the scan for the suite's place skips with it.
    private static let optionsWithValue: Set<String> = ["--directory", "--since", "--count", "--format", "--to", "--from"]

    /// The command line with the first word after the verb that is not an option replaced by
    /// `NSGlobalDomain` when it is `-g` or `-globalDomain`.
    static func rewritten(_ arguments: [String]) -> [String] {
        guard arguments.count >= 2 else { return arguments }
        var result = arguments
        var index = 1
        while index < result.count {
            let word = result[index]
            if word == "-g" || word == "-globalDomain" {
                result[index] = SharedDefaults.globalDomain
                return result
            }
            if word == "--" || !word.hasPrefix("--") { return result }
            index += optionsWithValue.contains(word) ? 2 : 1
        }
        return result
    }
}
