import Foundation
import GroupDefaults
import TestSupport

/// The search list measured against Foundation: `UserDefaults.standard` (the only instance whose
/// `addSuite(named:)` Foundation on Linux honours) beside a `SharedDefaults` suite, both reading
/// this process's arguments (the test starts it with `-key value` pairs), with added suites, the
/// global domain and volatile and persistent domains, every getter of every key compared after
/// every step.
///
/// Mapped or left out, each a row of the table of docs/guide/differences-from-userdefaults.md: a
/// suite is not added again while added (Foundation on Linux lists it twice); Foundation is
/// made to synchronize after each change of an added suite (its `standard` reads the old values
/// until then); Foundation on
/// Linux reads the global domain from the domain `kCFPreferencesAnyApplication` (a suite named
/// `UserDefaults.globalDomain` is read by no one); and values are those Foundation's files keep as
/// they are (dates in whole seconds, no -0.0), since setting a persistent domain makes Foundation
/// write its files and read them back.
struct SearchDifferential {
    static let addedNames = ["groupdefaults.diff.a", "groupdefaults.diff.b"]
    /// Foundation's name of the global domain on Linux.
    static let foundationGlobal = "kCFPreferencesAnyApplication"
    var base: Differential
    let foundationSuites: [UserDefaults]
    let ourSuites: [SharedDefaults]
    /// The suites added and not removed since: one is not added again (Foundation on Linux then
    /// lists it twice, and reads after a `removeSuite(named:)` do not always follow its list: a
    /// stated difference).
    var added: Set<Int> = []

    init(directory: URL, seed: UInt64) throws {
        let standard = UserDefaults.standard
        var configuration = SharedDefaults.Configuration()
        configuration.managedDirectory = nil
        let ours = try SharedDefaults(suiteName: "differential-search", directory: directory, configuration: configuration)
        base = Differential(foundation: standard, ours: ours, seed: seed)
        base.fileSafeValues = true
        let names = Self.addedNames + [Self.foundationGlobal]
        foundationSuites = names.map { UserDefaults(suiteName: $0)! }
        ourSuites = try (Self.addedNames + [SharedDefaults.globalDomain]).map { try SharedDefaults(suiteName: $0, directory: directory) }
    }

    enum Operation: CustomStringConvertible {
        case base(Differential.Operation)
        case addSuite(Int)
        case removeSuite(Int)
        /// A set (or with nil a removal) in added suite 0 or 1, or the global domain (2).
        case setIn(Int, String, Any?)
        case setVolatile([String: Any])
        case setPersistent(Int, [String: Any])
        case removePersistent(Int)

        var description: String {
            func name(_ i: Int) -> String { i < 2 ? SearchDifferential.addedNames[i] : "global" }
            switch self {
            case .base(let operation): return "\(operation)"
            case .addSuite(let i): return "addSuite(\(name(i)))"
            case .removeSuite(let i): return "removeSuite(\(name(i)))"
            case .setIn(let i, let key, let value): return "\(name(i)).set(\(Differential.canonical(value)), \(key.debugDescription))"
            case .setVolatile(let values): return "setVolatileDomain(\(Differential.canonical(values)), custom)"
            case .setPersistent(let i, let values): return "setPersistentDomain(\(Differential.canonical(values)), \(name(i)))"
            case .removePersistent(let i): return "removePersistentDomain(\(name(i)))"
            }
        }
    }

    mutating func nextOperation() -> Operation {
        switch base.below(24) {
        case 0..<10: return .base(base.nextOperation())
        case 10, 11: return .addSuite(base.below(2))
        case 12: return .removeSuite(base.below(2))
        case 13..<19: return .setIn(base.below(3), base.key(), base.below(4) == 0 ? nil : base.value(depth: 0))
        case 19: return .setVolatile([base.key(): base.value(depth: 0)])
        case 20, 21:
            var values: [String: Any] = [:]
            for _ in 0..<base.below(3) { values[base.key()] = base.value(depth: 0) }
            return .setPersistent(base.below(2), values)
        default: return .removePersistent(base.below(2))
        }
    }

    func apply(_ operation: Operation) {
        switch operation {
        case .base(let operation):
            operation.apply(base.foundation)
            operation.apply(base.ours)
        case .addSuite(let i):
            base.foundation.addSuite(named: Self.addedNames[i])
            base.ours.addSuite(named: Self.addedNames[i])
        case .removeSuite(let i):
            base.foundation.removeSuite(named: Self.addedNames[i])
            base.ours.removeSuite(named: Self.addedNames[i])
        case .setIn(let i, let key, let value):
            foundationSuites[i].set(value, forKey: key)
            // Foundation's `standard` keeps reading an added suite's old values until it
            // synchronizes (a stated difference: SharedDefaults reads every write at once).
            base.foundation.synchronize()
            ourSuites[i].set(value, forKey: key)
        case .setVolatile(let values):
            base.foundation.setVolatileDomain(values, forName: "custom")
            base.ours.setVolatileDomain(values, forName: "custom")
        case .setPersistent(let i, let values):
            base.foundation.setPersistentDomain(values, forName: Self.addedNames[i])
            base.foundation.synchronize()
            base.ours.setPersistentDomain(values, forName: Self.addedNames[i])
        case .removePersistent(let i):
            base.foundation.removePersistentDomain(forName: Self.addedNames[i])
            base.foundation.synchronize()
            base.ours.removePersistentDomain(forName: Self.addedNames[i])
        }
    }

    /// Every getter of every key, and the domains' own contents.
    func compare() -> [String] {
        var found = base.compare()
        func check(_ what: String, _ ours: String, _ theirs: String) {
            if ours != theirs { found.append("\(what): \(ours), Foundation \(theirs)") }
        }
        check(
            "volatileDomain(custom)",
            Differential.canonical(base.ours.volatileDomain(forName: "custom")),
            Differential.canonical(base.foundation.volatileDomain(forName: "custom"))
        )
        check(
            "volatileDomain(arguments)",
            Differential.canonical(base.ours.volatileDomain(forName: SharedDefaults.argumentDomain)),
            Differential.canonical(base.foundation.volatileDomain(forName: UserDefaults.argumentDomain))
        )
        let ourNames = base.ours.volatileDomainNames.filter { $0 != SharedDefaults.registrationDomain }.sorted()
        check("volatileDomainNames", "\(ourNames)", "\(base.foundation.volatileDomainNames.sorted())")
        for name in Self.addedNames {
            check(
                "persistentDomain(\(name))",
                Differential.canonical(base.ours.persistentDomain(forName: name)),
                Differential.canonical(base.foundation.persistentDomain(forName: name))
            )
        }
        return found
    }

    /// Runs `count` operations, printing differences as `Differential.run` does.
    mutating func run(count: Int) {
        for (i, name) in (Self.addedNames + [Self.foundationGlobal]).enumerated() {
            foundationSuites[i].removePersistentDomain(forName: name)
            for key in Differential.keys { foundationSuites[i].removeObject(forKey: key) }
        }
        var stepsWithDifferences = 0
        var previous: Set<String> = []
        for step in 0..<count {
            var operation = nextOperation()
            while true {
                if case .base(let inner) = operation, inner.isEqualButNotSame(as: base.foundation) {
                } else if case .addSuite(let i) = operation, added.contains(i) {
                } else {
                    break
                }
                operation = nextOperation()
            }
            if case .addSuite(let i) = operation { added.insert(i) }
            if case .removeSuite(let i) = operation { added.remove(i) }
            apply(operation)
            let differences = Set(compare())
            let new = differences.subtracting(previous)
            previous = differences
            guard !new.isEmpty else { continue }
            stepsWithDifferences += 1
            if stepsWithDifferences <= Differential.printedSteps {
                for difference in new.sorted() { say("difference at step \(step), after \(operation): \(difference)") }
            }
        }
        if stepsWithDifferences > Differential.printedSteps {
            say("difference: \(stepsWithDifferences - Differential.printedSteps) more steps with new differences")
        }
        say("done \(count)")
    }
}

extension SearchDifferential {
    /// Prints, for each row of the search list in the differences table, what Foundation and
    /// SharedDefaults answer (the test compares the lines).
    static func statedDifferences(directory: URL) {
        var configuration = SharedDefaults.Configuration()
        configuration.managedDirectory = nil
        configuration.arguments = []
        func shared(_ name: String) -> SharedDefaults {
            do { return try SharedDefaults(suiteName: name, directory: directory, configuration: configuration) } catch { fail("\(error)") }
        }
        let standard = UserDefaults.standard
        let app = shared("app")
        func show(_ value: Any?) -> String { value.map { "\($0)" } ?? "nil" }

        // The global domain's name.
        UserDefaults(suiteName: UserDefaults.globalDomain)!.set("g", forKey: "global")
        shared(SharedDefaults.globalDomain).set("g", forKey: "global")
        say("global domain by name: foundation \(show(standard.string(forKey: "global"))), shared \(show(app.string(forKey: "global")))")

        // addSuite(named:) of a suite's own instance.
        UserDefaults(suiteName: "stated.added")!.set("a", forKey: "added")
        shared("stated.added").set("a", forKey: "added")
        let suiteInstance = UserDefaults(suiteName: "stated.app")!
        suiteInstance.addSuite(named: "stated.added")
        app.addSuite(named: "stated.added")
        say("addSuite of a suite: foundation \(show(suiteInstance.string(forKey: "added"))), shared \(show(app.string(forKey: "added")))")

        // Added again while added: moved to the top, and one removal removes it.
        UserDefaults(suiteName: "stated.other")!.set("o", forKey: "added")
        shared("stated.other").set("o", forKey: "added")
        app.addSuite(named: "stated.other")
        app.addSuite(named: "stated.added")
        let first = show(app.string(forKey: "added"))
        app.addSuite(named: "stated.other")
        let moved = show(app.string(forKey: "added"))
        app.removeSuite(named: "stated.other")
        say("added again: shared \(first), then \(moved), removed once \(show(app.string(forKey: "added")))")
        app.removeSuite(named: "stated.added")

        // A change of an added suite through another instance.
        standard.addSuite(named: "stated.added")
        app.addSuite(named: "stated.added")
        _ = standard.string(forKey: "added")
        UserDefaults(suiteName: "stated.added")!.set("b", forKey: "added")
        shared("stated.added").set("b", forKey: "added")
        let before = show(standard.string(forKey: "added"))
        standard.synchronize()
        say(
            "added suite changed elsewhere: foundation \(before), after synchronize \(show(standard.string(forKey: "added"))), shared \(show(app.string(forKey: "added")))"
        )

        // The registration domain as a volatile domain.
        standard.setVolatileDomain(["registered": 1], forName: UserDefaults.registrationDomain)
        app.setVolatileDomain(["registered": 1], forName: SharedDefaults.registrationDomain)
        say(
            "registration domain set: foundation \(standard.integer(forKey: "registered")) \(standard.volatileDomainNames.sorted()), shared \(app.integer(forKey: "registered")) \(app.volatileDomainNames.sorted())"
        )
    }
}
