import ArgumentParser

/// The settings given as flags on a parsed command line, by setting name, as text: ArgumentParser
/// has checked their types; what they come to with the environment, the file and the defaults is
/// `SettingsSources.resolve`'s to say. A setting's option has no default of its own (nil: not
/// given), and its property is the setting's name in camel case (`maxWait` is `--max-wait`).
enum GivenFlags {
    static func of(_ options: any ParsableArguments) -> [String: String] {
        var given: [String: String] = [:]
        for child in Mirror(reflecting: options).children {
            guard let label = child.label?.dropFirst() else { continue }  // `_maxWait`: the property wrapper
            if let group = child.value as? any ParsedGroup {
                given.merge(of(group.parsedOptions)) { $1 }
            } else if let flag = child.value as? any GivenFlag, let text = flag.givenText {
                given[settingName(String(label))] = text
            }
        }
        return given.filter { ServerSettings.named($0.key) != nil }
    }

    /// `maxWait` → `max-wait`, `postgresURL` → `postgres-url`: as ArgumentParser names an option.
    static func settingName(_ property: String) -> String {
        var name = ""
        var previous: Character?
        for character in property {
            if character.isUppercase, let previous, previous.isLowercase { name.append("-") }
            name.append(Character(character.lowercased()))
            previous = character
        }
        return name
    }
}

/// An option or flag that holds a setting's value, if given.
protocol GivenFlag {
    var givenText: String? { get }
}

/// An option group's parsed options.
protocol ParsedGroup {
    var parsedOptions: any ParsableArguments { get }
}

/// A setting's value that may be absent (not given).
protocol OptionalSettingValue {
    var settingText: String? { get }
}

extension Optional: OptionalSettingValue where Wrapped: SettingValue {
    var settingText: String? { map(\.settingText) }
}

extension Option: GivenFlag where Value: OptionalSettingValue {
    var givenText: String? { wrappedValue.settingText }
}

extension Flag: GivenFlag where Value: OptionalSettingValue {
    var givenText: String? { wrappedValue.settingText }
}

extension OptionGroup: ParsedGroup {
    var parsedOptions: any ParsableArguments { wrappedValue }
}
