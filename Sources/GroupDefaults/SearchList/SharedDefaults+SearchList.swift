import Foundation
import GroupDefaultsWire
import Synchronization

// The search list: the domains a handle reads through besides its suite, with Foundation's names
// (`addSuite(named:)`, the volatile and persistent domains), and the managed settings an
// administrator forces (`objectIsForced(forKey:)`).

extension SharedDefaults {
    /// The global domain's name: the suite of that name in a handle's directory is read by every
    /// handle after its own suite and added suites (`groupdefaults … -g`).
    public static let globalDomain = "NSGlobalDomain"
    /// The argument domain's name: this process's `-key value` arguments, read before the suite
    /// (see `Configuration.arguments`); a volatile domain.
    public static let argumentDomain = "NSArgumentDomain"
    /// The registration domain's name: the registered defaults (`register(defaults:)`), read last;
    /// a volatile domain.
    public static let registrationDomain = "NSRegistrationDomain"

    /// A domain of the search list: where a key's value comes from, and where a change was made.
    public enum Domain: Sendable, Hashable, CustomStringConvertible {
        /// Forced by an administrator's managed settings file (the path).
        case managed(file: String)
        /// The argument domain (`-key value` on the command line, or `setVolatileDomain`).
        case arguments
        /// The suite itself.
        case suite
        /// A suite added with `addSuite(named:)` (its name).
        case addedSuite(String)
        /// The global domain.
        case global
        /// The registered defaults.
        case registration

        public var description: String {
            switch self {
            case .managed(let file): "managed by \(file)"
            case .arguments: "arguments"
            case .suite: "suite"
            case .addedSuite(let name): "added suite \(name)"
            case .global: "global domain"
            case .registration: "registered defaults"
            }
        }
    }

    // MARK: Reading through the search list

    /// The value `key` reads as and the domain it comes from: the managed settings, the argument
    /// domain, the suite, the added suites (the last added first), the global domain, the
    /// registered defaults; nil if none holds it. A stored value that fails to decode is skipped
    /// and reported (`lastError`).
    public func resolvedValue(forKey key: String) -> (value: PropertyListValue, domain: Domain)? {
        let exact = key.exact
        if let managed = searchList.managedEntry(forKey: exact) { return (managed.value, .managed(file: managed.file)) }
        if let argument = searchList.argumentValue(forKey: exact) { return (argument, .arguments) }
        do {
            if let value = try storedValue(forKey: key) { return (value, .suite) }
        } catch {
            report(error)
        }
        for lower in searchList.lowerSuites {
            do {
                if let value = try lower.storedValue(forKey: key) {
                    return (value, lower === searchList.global ? .global : .addedSuite(lower.name))
                }
            } catch {
                report(error)
            }
        }
        return store.registeredValue(forKey: key).map { ($0, .registration) }
    }

    // MARK: Added suites

    /// Reads `suiteName` (in this handle's directory) after this suite and before the global
    /// domain, for this handle: an app reads its own settings and falls back to its app group's.
    /// The suite added last is read first. Adding this suite itself or the global domain does
    /// nothing; a suite whose file does not exist reads as empty until it is created (it is never
    /// created by reading). An invalid name is reported (`lastError`).
    public func addSuite(named suiteName: String) {
        do {
            try searchList.addSuite(named: suiteName)
        } catch {
            report(error)
        }
        domainChanges.searchListChanged()
    }

    /// Stops reading `suiteName` through this handle.
    public func removeSuite(named suiteName: String) {
        if searchList.removeSuite(named: suiteName) { domainChanges.searchListChanged() }
    }

    // MARK: Volatile domains

    /// The names of this handle's volatile domains: the argument domain, the registration domain
    /// once defaults are registered, and those set with `setVolatileDomain(_:forName:)`.
    public var volatileDomainNames: [String] {
        var names = searchList.volatileDomainNames
        if !store.registered.withLock({ $0.isEmpty }) { names.append(Self.registrationDomain) }
        return names
    }

    /// The volatile domain `domainName`: for `argumentDomain` the arguments read, for
    /// `registrationDomain` the registered defaults; empty if there is no such domain.
    public func volatileDomain(forName domainName: String) -> [String: Any] {
        domainValues(volatileValues(forName: domainName))
    }

    /// Merges `domain` into the volatile domain `domainName` (kept in memory, for this handle),
    /// its values replacing those of the same keys, as Foundation does: `removeVolatileDomain`
    /// first to replace the whole domain. Of them only the argument domain (read before the suite)
    /// and the registration domain (the registered defaults, read last) are in the search list. A
    /// value that is not a property-list value is reported (`unsupportedValue`) and nothing is
    /// changed.
    public func setVolatileDomain(_ domain: [String: Any], forName domainName: String) {
        guard let converted = convertedDomain(domain) else { return }
        replaceVolatile(volatileValues(forName: domainName).merging(converted) { _, new in new }, forName: domainName)
    }

    /// Removes the volatile domain `domainName`.
    public func removeVolatileDomain(forName domainName: String) {
        replaceVolatile(nil, forName: domainName)
    }

    private func volatileValues(forName domainName: String) -> [ExactName: PropertyListValue] {
        if domainName.isSameName(as: Self.registrationDomain) { return store.registered.withLock { $0 } }
        return searchList.volatileDomain(forName: domainName) ?? [:]
    }

    private func replaceVolatile(_ values: [ExactName: PropertyListValue]?, forName domainName: String) {
        if domainName.isSameName(as: Self.registrationDomain) {
            let old = store.registered.withLock { registered in
                defer { registered = values ?? [:] }
                return registered
            }
            domainChanges.domainChanged(.registration, old: old, new: values ?? [:], registration: true)
            return
        }
        let old = searchList.setVolatileDomain(values, forName: domainName)
        if domainName.isSameName(as: Self.argumentDomain) {
            domainChanges.domainChanged(.arguments, old: old, new: values ?? [:])
        }
    }

    /// `domain` as stored values, or nil (reported) if a value is not a property-list value.
    private func convertedDomain(_ domain: [String: Any]) -> [ExactName: PropertyListValue]? {
        var converted: [ExactName: PropertyListValue] = [:]
        for (key, value) in domain {
            guard let v = PropertyListValue(any: value) else {
                report(store.error(.unsupportedValue, key: key, PropertyListValue.refusal(of: value) + "; the domain was not changed"))
                return nil
            }
            converted[key.exact] = v
        }
        return converted
    }

    private func domainValues(_ values: [ExactName: PropertyListValue]) -> [String: Any] {
        var result: [String: Any] = [:]
        for (key, value) in values.sorted(by: { $0.key < $1.key }) { result[key.text] = value.anyValue }
        return result
    }

    // MARK: Persistent domains

    /// The values stored in the suite `domainName` (in this handle's directory; this suite, the
    /// global domain or any other), registered defaults not included: empty if the suite does not
    /// exist, nil (reported) if the name is not a valid suite name or the suite cannot be read.
    public func persistentDomain(forName domainName: String) -> [String: Any]? {
        do {
            guard let suite = try persistentSuite(domainName, creating: false) else { return [:] }
            var result: [String: Any] = [:]
            for (key, value) in try suite.storedValues() { result[key] = value.anyValue }
            return result
        } catch {
            report(error)
            return nil
        }
    }

    /// Makes `domain` the whole content of the suite `domainName` (creating it if needed), in one
    /// transaction (`replaceAll(with:)`): a value that is not a property-list value is reported
    /// and nothing is changed.
    public func setPersistentDomain(_ domain: [String: Any], forName domainName: String) {
        guard let converted = convertedDomain(domain) else { return }
        do {
            let suite = try persistentSuite(domainName, creating: true)
            try suite?.replaceAll(with: converted.map { (key: $0.key.text, value: $0.value) })
            for lower in searchList.lowerSuites where lower.name.isSameName(as: domainName) { lower.lookAgain() }
        } catch {
            report(error)
        }
    }

    /// Removes every value of the suite `domainName`, in one transaction; a suite that does not
    /// exist is left so.
    public func removePersistentDomain(forName domainName: String) {
        do {
            try persistentSuite(domainName, creating: false)?.replaceAll(with: [(key: String, value: PropertyListValue)]())
        } catch {
            report(error)
        }
    }

    /// A handle on the suite `name` in this handle's directory (this handle for its own suite);
    /// nil when it does not exist and `creating` is false.
    private func persistentSuite(_ name: String, creating: Bool) throws -> SharedDefaults? {
        if name.isSameName(as: suiteName) { return self }
        let location = try SuiteLocation(suiteName: name, directory: searchList.directory)
        var configuration = configuration
        configuration.arguments = []
        configuration.managedDirectory = nil
        if !creating && !FileManager.default.fileExists(atPath: location.path) { return nil }
        return try SharedDefaults(suiteName: name, directory: searchList.directory, configuration: configuration)
    }
}
