import Foundation
import PackagePlugin

/// Generates the README tour functions the `ReadmeTests` target runs (see
/// `Tests/ReadmeTourGenerator`), again whenever README.md changes.
@main
struct ReadmeTour: BuildToolPlugin {
    func createBuildCommands(context: PluginContext, target: any Target) throws -> [Command] {
        let readme = context.package.directoryURL.appending(path: "README.md")
        let output = context.pluginWorkDirectoryURL.appending(path: "ReadmeTour+README.swift")
        return [
            .buildCommand(
                displayName: "Extracting the Swift tours of README.md",
                executable: try context.tool(named: "ReadmeTourGenerator").url,
                arguments: [readme.path, output.path],
                inputFiles: [readme],
                outputFiles: [output])
        ]
    }
}
