public import AsyncHTTPClient
public import Foundation
import Glibc
public import GroupDefaults
import GroupDefaultsWire

/// A suite's sync settings as `groupdefaults-sync configure` stores them in the suite: the server,
/// the file the token is read from (never the token), and a private certificate authority.
public struct SyncSettings: Sendable, Equatable {
    /// The server's base URL (`https://sync.example.com`).
    public var server: URL
    /// The path of the file the bearer token is read from before each request (mode 0600).
    public var tokenFile: String
    /// A PEM file of a private certificate authority the server's certificate may chain to, beside
    /// the system's; nil for the system's alone.
    public var caFile: String?
    /// Patterns (`GlobPattern`: `*` matches any run of characters) of keys that never leave this
    /// device: drafts, window sizes, per-device caches. Their changes are never pushed and pulled
    /// entries for them are not applied.
    public var localOnlyKeys: [String]
    /// The file of the suite's end-to-end encryption keys (`SuiteKeys`, mode 0600) for an encrypted
    /// suite; nil for a plain one.
    public var keyFile: String?
    /// For a suite another account shares with this one (joined with an invitation): whose it is,
    /// its name on the server and this account's role; nil for the account's own suite, which has
    /// the local suite's name on the server.
    public var shared: Membership?

    /// Settings for a suite; nothing is stored or checked until `store(in:)`.
    public init(
        server: URL,
        tokenFile: String,
        caFile: String? = nil,
        localOnlyKeys: [String] = [],
        keyFile: String? = nil,
        shared: Membership? = nil
    ) {
        self.server = server
        self.tokenFile = tokenFile
        self.caFile = caFile
        self.localOnlyKeys = localOnlyKeys
        self.keyFile = keyFile
        self.shared = shared
    }

    /// The suite name the keys of `defaults` are bound to: the owner's name for a suite another
    /// account shares with this one (the name in every sealed entry), else the suite's own.
    public func keysSuite(of defaults: SharedDefaults) -> String { shared?.suite ?? defaults.suiteName }

    /// The settings stored in `defaults`; nil when the suite is not synced.
    public static func stored(in defaults: SharedDefaults) throws(SyncError) -> SyncSettings? {
        let state: SyncState
        do { state = try defaults.syncState() } catch { throw SyncError.local(error) }
        guard let server = state.server else { return nil }
        guard let url = URL(string: server), let tokenFile = state.tokenFile else {
            throw SyncError(.local, "the suite's sync settings are incomplete: configure it again")
        }
        let shared = try state.share.map { text throws(SyncError) in
            guard let shared = Membership(storedText: text) else {
                throw SyncError(.local, "the suite's record of who shares it cannot be read: configure it again")
            }
            return shared
        }
        return SyncSettings(
            server: url,
            tokenFile: tokenFile,
            caFile: state.caFile,
            localOnlyKeys: state.localOnlyKeys,
            keyFile: state.keyFile,
            shared: shared
        )
    }

    /// Stores these settings in `defaults` and marks it synced (see `enableSync`), recording the
    /// moment sync was turned on the first time. The token file is checked first: it must exist,
    /// hold a token, and not be readable by group or others; and every local-only pattern must be
    /// valid; and the key file, if any, must hold the suite's keys and be private too. A key that
    /// becomes local-only is no longer pushed; one that stops being local-only is pushed at the next
    /// sync.
    public func store(in defaults: SharedDefaults) throws(SyncError) {
        _ = try TokenFile.read(tokenFile)
        if let keyFile { _ = try SuiteKeys.read(from: keyFile, suite: keysSuite(of: defaults)) }
        for pattern in localOnlyKeys {
            do { _ = try GlobPattern(pattern) } catch { throw SyncError(.local, "local-only keys: \(error)") }
        }
        do {
            try defaults.enableSync(
                server: server.absoluteString,
                tokenFile: tokenFile,
                caFile: caFile,
                keyFile: keyFile,
                share: shared?.storedText,
                localOnly: localOnlyKeys
            )
        } catch {
            throw SyncError.local(error)
        }
    }
}

/// A file holding a bearer token: its only line.
public enum TokenFile {
    /// Writes `token` to a new file at `path` (mode 0600, atomically), refusing to replace a file
    /// that exists there (another suite's token may be in it).
    public static func create(_ token: String, at path: String) throws(SyncError) {
        guard !FileManager.default.fileExists(atPath: path) else {
            throw SyncError(.local, "the token file \(path) exists already (another suite's token may be in it)")
        }
        try PrivateFile.write(Data((token + "\n").utf8), to: path, what: "token file")
    }

    /// The token in `path`, refusing a file its group or others can read.
    public static func read(_ path: String) throws(SyncError) -> String {
        try PrivateFile.check(path, what: "token file", missing: .authenticationNeeded)
        let text: String
        do { text = try String(contentsOfFile: path, encoding: .utf8) } catch {
            throw SyncError(.authenticationNeeded, "cannot read the token file \(path): \(error.localizedDescription)")
        }
        let token = text.trimmingCharacters(in: .whitespacesAndNewlines)
        guard !token.isEmpty, !token.contains(where: \.isWhitespace) else {
            throw SyncError(.authenticationNeeded, "the token file \(path) does not hold one token")
        }
        // A token is printable ASCII. Anything else is a damaged file (a power cut can leave one
        // full of zero bytes); sent as it is, no HTTP request could even carry it.
        guard token.utf8.allSatisfy({ (0x21...0x7E).contains($0) }) else {
            throw SyncError(
                .authenticationNeeded,
                "the token file \(path) is damaged (it holds bytes no token has, as a power cut can leave): put the token in it again"
            )
        }
        return token
    }
}

extension SyncEngine {
    /// An engine for a suite configured with `groupdefaults-sync configure` (or `SyncSettings.store`):
    /// the server, token file and certificate authority come from the suite; the token is read
    /// before each request from the file the suite names then, so a new token, in the same file or
    /// configured in another one, takes effect without a restart.
    /// `http` must verify certificates with the suite's authority (`SyncClient.makeHTTPClient(caFile:)`);
    /// so must `streamHTTP`, a client of its own for the event stream of `run()`
    /// (`SyncClient.streamHTTP`; nil: `http`).
    /// An encrypted suite's keys are read from its key file here, once.
    public init(
        configured defaults: SharedDefaults,
        http: HTTPClient,
        streamHTTP: HTTPClient? = nil,
        options: Options = Options()
    ) throws(SyncError) {
        guard let settings = try SyncSettings.stored(in: defaults) else {
            throw SyncError(.local, "the suite \(defaults.suiteName) is not configured for sync")
        }
        let configuredFile = settings.tokenFile
        var client = SyncClient(server: settings.server, suite: settings.shared?.suite ?? defaults.suiteName, http: http) {
            try TokenFile.read((try? defaults.syncState().tokenFile) ?? configuredFile)
        }
        client.streamHTTP = streamHTTP
        client.owner = settings.shared?.owner
        client.timeout = options.answerTimeout
        client.connectTimeout = options.connectTimeout
        let keys: SuiteKeys?
        do {
            keys = try settings.keyFile.map { path throws(SyncError) in try SuiteKeys.read(from: path, suite: settings.keysSuite(of: defaults)) }
        } catch {
            // A key file that cannot be used stops every step: what `status` (another process) shows too.
            SyncHealth.recordStartFailure(error, in: defaults)
            throw error
        }
        self.init(defaults: defaults, client: client, options: options, logger: nil, keys: keys, keyFile: settings.keyFile, shared: settings.shared)
    }
}

extension SyncSettings {
    /// Whether `other` names the same server, token file, key file and shared suite (names and
    /// paths compared as bytes): what an engine made from `other` is bound to.
    func sameConnection(as other: SyncSettings?) -> Bool {
        guard let other else { return false }
        return server == other.server && tokenFile.isSameName(as: other.tokenFile) && keyFile.isSameName(as: other.keyFile)
            && (shared?.owner).isSameName(as: other.shared?.owner) && (shared?.suite).isSameName(as: other.shared?.suite)
    }
}

extension SharedDefaults {
    /// The suite another account shares that this local suite was a copy of before this account
    /// left it (`leave`); nil for a suite that never left one, or syncs again.
    package func leftMembership() -> Membership? {
        (try? leftShare()).flatMap { $0.flatMap(Membership.init(storedText:)) }
    }
}

/// What the tools tell a person whose suite does not sync: how to configure it, or, for a copy of
/// a suite this account left, how to join that suite again (never a plain `configure`, which would
/// upload the owner's values into this account's own suite).
package enum UnconfiguredHint {
    /// One sentence for `suite`, stored in `defaults` (nil: not there).
    package static func sentence(suite: String, defaults: SharedDefaults?) -> String {
        if let left = defaults?.leftMembership() { return rejoin(suite: suite, left: left) }
        return "\(suite) is not configured for sync: run `groupdefaults-sync configure \(suite) --server URL --token-file PATH`"
    }

    /// `suite` is a copy of `left`, which this account left: how to join it again.
    package static func rejoin(suite: String, left: Membership) -> String {
        "\(suite) holds a copy of \(left.owner)'s suite \(left.suite), which this account left: to join it again, ask \(left.owner) for an invitation and run `groupdefaults-sync configure --invitation CODE --server URL --token-file PATH --as \(suite)`"
    }
}
