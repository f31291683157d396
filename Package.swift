// swift-tools-version: 6.1
import PackageDescription

// The settings loop of swift-log's and Hummingbird's manifests: upcoming language features, on for
// every target. `InternalImportsByDefault` everywhere but the core library, whose public API is made
// of Foundation's types (URL, Data, Date, Notification) and swift-log's Logger: there it would only
// turn every `import` into `public import`.
let coreSwiftSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
]
let swiftSettings = coreSwiftSettings + [.enableUpcomingFeature("InternalImportsByDefault")]

let package = Package(
    name: "GroupDefaults",
    // No `platforms`: Linux is what is built and tested (the code imports Glibc and uses inotify),
    // so the manifest claims no Apple platform.
    products: [
        .library(name: "GroupDefaults", targets: ["GroupDefaults"]),
        .library(name: "GroupDefaultsWire", targets: ["GroupDefaultsWire"]),
        .executable(name: "groupdefaults", targets: ["GroupDefaultsCLI"]),
        .library(name: "GroupDefaultsSync", targets: ["GroupDefaultsSync"]),
        .executable(name: "groupdefaults-server", targets: ["groupdefaults-server"]),
        .executable(name: "groupdefaults-sync", targets: ["groupdefaults-sync"]),
        .executable(name: "groupdefaults-bench", targets: ["groupdefaults-bench"]),
        .executable(name: "demo-host-app", targets: ["demo-host-app"]),
        .executable(name: "demo-notification-service", targets: ["demo-notification-service"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        // `swift package generate-documentation`: Tools/docs builds the DocC catalogues with it.
        .package(url: "https://github.com/swiftlang/swift-docc-plugin", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-atomics.git", from: "1.3.0"),
        // The sync server (GroupDefaultsServer, groupdefaults-server).
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.28.1"),
        // The operator console: bcrypt for operators' passwords, Mustache templates for its pages.
        .package(url: "https://github.com/hummingbird-project/hummingbird-auth.git", from: "2.5.0"),
        .package(url: "https://github.com/hummingbird-project/swift-mustache.git", from: "2.1.1"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        // The server's settings: flags, environment, settings file and defaults read with one precedence.
        // No traits: the providers it uses are built in or ours (the settings file keeps its format).
        .package(url: "https://github.com/apple/swift-configuration.git", from: "1.4.0", traits: []),
        .package(url: "https://github.com/vapor/postgres-nio.git", from: "1.33.2"),
        .package(url: "https://github.com/apple/swift-crypto.git", from: "3.12.3"),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.1"),
        .package(url: "https://github.com/x-sheep/swift-property-based.git", from: "2.0.1"),
        // The sync client (GroupDefaultsSync, groupdefaults-sync).
        .package(url: "https://github.com/swift-server/async-http-client.git", from: "1.37.0"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-nio-ssl.git", from: "2.37.6"),
        // The server's own HTTP/1 pipeline (`StreamHoldingHTTP1Channel`): NIO's HTTP types codec.
        .package(url: "https://github.com/apple/swift-nio-extras.git", from: "1.35.2"),
        .package(url: "https://github.com/apple/swift-http-types.git", from: "1.8.0"),
    ],
    targets: [
        .systemLibrary(
            name: "CLMDB",
            pkgConfig: "lmdb",
            providers: [.apt(["liblmdb-dev"]), .brew(["lmdb"])]
        ),
        // The LMDB layer: the only code that imports CLMDB. `package` API, used by the core and by
        // the server's embedded storage.
        // The system calls that can be interrupted, retried on EINTR in one place (package only).
        .target(name: "SystemCalls", swiftSettings: swiftSettings),
        .target(name: "GroupDefaultsLMDB", dependencies: ["CLMDB", "SystemCalls"], swiftSettings: swiftSettings),
        // The sync protocol as it travels: values and their typed JSON, HLCs and stamps, the JSON
        // bodies, the event-stream codec, the error codes. Foundation only; the core re-exports it,
        // the server uses it without the core.
        .target(name: "GroupDefaultsWire", swiftSettings: swiftSettings),
        .target(
            name: "GroupDefaults",
            dependencies: [
                "GroupDefaultsWire", "GroupDefaultsLMDB", "SystemCalls", "PropertyListFormats",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Atomics", package: "swift-atomics"),
            ],
            swiftSettings: coreSwiftSettings
        ),
        // Property-list file formats (XML, binary, old-style text, JSON text), used by the tools.
        .target(name: "PropertyListFormats", dependencies: ["GroupDefaultsWire"], swiftSettings: swiftSettings),
        // What the executables share: one-line failures and exit statuses, unbuffered output, logs
        // with names and values escaped, the signals a tool that follows changes ends at, and a
        // JSON value. `package` API.
        .target(
            name: "CommandLineSupport",
            dependencies: [
                "GroupDefaultsWire", "SystemCalls",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),

        // The command-line tool for suites: the verbs of macOS `defaults`, plus watch, JSON, backup, verify.
        .executableTarget(
            name: "GroupDefaultsCLI",
            dependencies: [
                "GroupDefaults", "PropertyListFormats", "CommandLineSupport",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "GroupDefaultsCLITests",
            dependencies: ["GroupDefaults", "GroupDefaultsCLI", "CommandLineSupport", "ServerLaunching", "TestSupport"],
            swiftSettings: swiftSettings
        ),

        // The sync server: Hummingbird routes, auth, limits, the storage seam and its two backends
        // (embedded LMDB through the LMDB layer; PostgreSQL), and its thin executable.
        .target(
            name: "GroupDefaultsServer",
            dependencies: [
                "GroupDefaultsWire", "GroupDefaultsLMDB", "SystemCalls",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "HummingbirdTLS", package: "hummingbird"),
                .product(name: "HummingbirdBcrypt", package: "hummingbird-auth"),
                .product(name: "Mustache", package: "swift-mustache"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
                .product(name: "NIOHTTPTypesHTTP1", package: "swift-nio-extras"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
            ],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "groupdefaults-server",
            dependencies: [
                "GroupDefaultsWire", "GroupDefaultsServer", "CommandLineSupport", "SystemCalls",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Configuration", package: "swift-configuration"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
            ],
            swiftSettings: swiftSettings
        ),
        // The real server and a throwaway PostgreSQL, started for the tests and for the benchmark.
        .target(name: "ServerLaunching", dependencies: ["SystemCalls"], swiftSettings: swiftSettings),
        // What the test targets share: built executables run to completion or line by line, a
        // temporary directory per test, the real server executable started on loopback, token
        // commands, a throwaway PostgreSQL, the storage backends, a seeded random generator.
        .target(
            name: "TestSupport",
            dependencies: [
                "CommandLineSupport", "ServerLaunching",
                // `HelpCheck` tries each tool's options with the tool's own parser.
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            path: "Tests/TestSupport",
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "GroupDefaultsServerTests",
            dependencies: [
                "GroupDefaultsServer", "GroupDefaultsWire", "groupdefaults-server", "ServerLaunching", "TestSupport",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "PropertyBased", package: "swift-property-based"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),

        // The sync client: the engine that mirrors a suite to the server (AsyncHTTPClient), and the
        // tool that configures and runs it.
        .target(
            name: "GroupDefaultsSync",
            dependencies: [
                "GroupDefaults", "GroupDefaultsWire", "SystemCalls",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "groupdefaults-sync",
            dependencies: [
                "GroupDefaults", "GroupDefaultsSync", "CommandLineSupport", "SystemCalls",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "GroupDefaultsSyncTests",
            dependencies: [
                "GroupDefaults", "GroupDefaultsSync", "groupdefaults-sync", "groupdefaults-server", "GroupDefaultsCLI",
                "TestSupport", "GroupDefaultsServer", "GroupDefaultsLMDB",
                // A server built in-process (`buildApplication`) for settings no flag sets.
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
            ],
            swiftSettings: swiftSettings
        ),

        // Benchmark: the store beside raw LMDB (C) and Foundation's UserDefaults, in one run.
        .target(name: "CLMDBReference", dependencies: ["CLMDB"]),
        .executableTarget(
            name: "groupdefaults-bench",
            dependencies: [
                "GroupDefaults", "GroupDefaultsSync", "CLMDBReference", "CommandLineSupport", "ServerLaunching", "SystemCalls",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),

        // The seed scenario as two real processes: the host app chooses a sound, the notification
        // service puts it in a push payload. `DemoSupport` holds the sound checks both make.
        .target(name: "DemoSupport", swiftSettings: swiftSettings),
        .executableTarget(
            name: "demo-host-app",
            dependencies: [
                "GroupDefaults", "DemoSupport", "PropertyListFormats", "CommandLineSupport",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "demo-notification-service",
            dependencies: [
                "GroupDefaults", "DemoSupport", "PropertyListFormats", "CommandLineSupport",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "DemoTests",
            dependencies: ["GroupDefaults", "demo-host-app", "demo-notification-service", "TestSupport"],
            swiftSettings: swiftSettings
        ),

        // A store as an older version left it (an account name today's rules refuse), for
        // Tools/nemesis.
        .executableTarget(
            name: "GroupDefaultsLegacyStore",
            dependencies: ["GroupDefaultsServer", .product(name: "Logging", package: "swift-log")],
            path: "Tests/GroupDefaultsLegacyStore",
            swiftSettings: swiftSettings
        ),
        // A small executable the tests spawn as separate processes.
        .executableTarget(
            name: "GroupDefaultsTestHelper",
            dependencies: ["GroupDefaults", "TestSupport"],
            path: "Tests/GroupDefaultsTestHelper",
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "GroupDefaultsTests",
            dependencies: [
                "GroupDefaults", "GroupDefaultsLMDB", "PropertyListFormats", "ServerLaunching", "TestSupport",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "PropertyBased", package: "swift-property-based"),
            ],
            swiftSettings: swiftSettings
        ),
    ],
    swiftLanguageModes: [.v6]
)
