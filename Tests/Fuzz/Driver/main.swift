import Foundation
import SatchelFuzzTargets

// `SatchelFuzz TARGET [options and paths…]`. Built with `-DSATCHEL_FUZZING` and libFuzzer
// (scripts/fuzz.sh), it hands the rest of the command line to libFuzzer; built normally, it
// replays the files and directories given through the target, to reproduce a finding.

/// The target the libFuzzer callback feeds: a C function pointer cannot capture it.
enum Selected {
    nonisolated(unsafe) static var target = FuzzTarget.json
}

let arguments = CommandLine.arguments
guard arguments.count >= 2, let target = FuzzTarget(rawValue: arguments[1]) else {
    let names = FuzzTarget.allCases.map(\.rawValue).joined(separator: "|")
    FileHandle.standardError.write(Data("usage: SatchelFuzz \(names) [libFuzzer options] [files or directories…]\n".utf8))
    exit(2)
}
Selected.target = target

#if SATCHEL_FUZZING
/// libFuzzer's entry point for a program with its own `main` (libclang_rt.fuzzer_no_main):
/// parses the options in `argv` and runs `callback` on each input until done.
@_silgen_name("LLVMFuzzerRunDriver")
func LLVMFuzzerRunDriver(
    _ argc: UnsafeMutablePointer<Int32>,
    _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>,
    _ callback: @convention(c) (UnsafePointer<UInt8>?, Int) -> Int32
) -> Int32

// libFuzzer parses argv as its own command line: the program's name, then its options and
// corpus directories, without the target's name.
var forwarded = [arguments[0]] + arguments.dropFirst(2)
var cArguments: [UnsafeMutablePointer<CChar>?] = forwarded.map { strdup($0) } + [nil]
var argc = Int32(forwarded.count)
let status = cArguments.withUnsafeMutableBufferPointer { buffer in
    var argv = buffer.baseAddress
    return LLVMFuzzerRunDriver(&argc, &argv) { data, size in
        Selected.target.run(UnsafeRawBufferPointer(start: data, count: size))
        return 0
    }
}
exit(status)
#else
// Replay: every file named, and every file under every directory named, in name order; options
// (libFuzzer's, starting with `-`) are ignored so that a fuzzing command line replays as it is.
var files: [URL] = []
for path in arguments.dropFirst(2) where !path.hasPrefix("-") {
    let url = URL(fileURLWithPath: path)
    var isDirectory: ObjCBool = false
    guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
        FileHandle.standardError.write(Data("SatchelFuzz: no such file or directory: \(path)\n".utf8))
        exit(2)
    }
    if isDirectory.boolValue {
        let found =
            FileManager.default.enumerator(at: url, includingPropertiesForKeys: [.isRegularFileKey])?
            .compactMap { $0 as? URL }
            .filter { (try? $0.resourceValues(forKeys: [.isRegularFileKey]).isRegularFile) == true } ?? []
        files += found.sorted { $0.path < $1.path }
    } else {
        files.append(url)
    }
}
/// Writes `text` to the standard output at once (unbuffered, unlike `print`).
func say(_ text: String) { FileHandle.standardOutput.write(Data(text.utf8)) }

var errors = 0
for file in files {
    // Named before it runs: if it stops the process, the last line says which file did.
    say("\(target.rawValue): \(file.path)")
    let bytes = try Data(contentsOf: file)
    let outcomes = bytes.withUnsafeBytes { target.outcomes($0) }
    if let finding = outcomes.lazy.compactMap(\.finding).first { fatalError(finding) }
    let refused = outcomes.filter { $0.error != nil }
    errors += refused.count
    say((refused.isEmpty ? " — accepted" : " — " + refused.map { "\($0.parser): \($0.error!)" }.joined(separator: "; ")) + "\n")
}
say("\(target.rawValue): replayed \(files.count) file(s), no finding (\(errors) typed error(s))\n")
#endif
