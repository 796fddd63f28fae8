//! copy_bw: host-device, device-device and GPU-to-GPU copy bandwidth per direction,
//! against the PCIe, NVLink and memory limits read from the machine.
fn main() -> std::process::ExitCode {
    fabricbench::copy_bw::main()
}
