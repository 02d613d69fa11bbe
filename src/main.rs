fn main() -> std::process::ExitCode {
    gyre::cli::main()
}
