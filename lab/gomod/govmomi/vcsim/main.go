// gpuready's vcsim: VMware's vCenter simulator (govmomi/simulator) with the topology a test
// or the lab asks for, credentials checked, TLS with a certificate of our choosing, and the
// two things stock vcsim does not model that GPU passthrough needs:
//   - VMkernel.Boot.atsSupport among each host's advanced options, described as a boolean option
//     (stock vcsim has no such option);
//   - NVIDIA GPUs on each host's PCI bus (from a device list file) and a HostPciPassthruSystem
//     that turns passthrough on and off for them (stock vcsim has none).
//
// Everything else (sessions, property collector, VMs, tasks, power) is stock vcsim.
//
// Built against the github.com/vmware/govmomi release that go.mod beside this folder pins
// (lab/gobuild.py). Prints "vcsim listening on URL" once it serves.
package main

import (
	"crypto/tls"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"net/url"
	"os"
	"os/signal"
	"syscall"

	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/simulator/esx"
	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"
)

// gpu is one PCI device of the device list file (see tests/fixtures/vsphere/).
type gpu struct {
	ID          string `json:"id"`
	VendorID    int16  `json:"vendor_id"`
	DeviceID    int16  `json:"device_id"`
	SubVendorID int16  `json:"sub_vendor_id"`
	SubDeviceID int16  `json:"sub_device_id"`
	ClassID     int16  `json:"class_id"`
	VendorName  string `json:"vendor_name"`
	DeviceName  string `json:"device_name"`
	Bus         uint8  `json:"bus"`
	Slot        uint8  `json:"slot"`
	Function    uint8  `json:"function"`
}

// PciPassthruSystem answers HostPciPassthruSystem calls for one host; the state it changes
// is the host's config.pciPassthruInfo, where clients read it.
type PciPassthruSystem struct {
	mo.HostPciPassthruSystem
	host *simulator.HostSystem
}

func (p *PciPassthruSystem) UpdatePassthruConfig(ctx *simulator.Context, req *types.UpdatePassthruConfig) soap.HasFault {
	body := new(methods.UpdatePassthruConfigBody)
	var fault types.BaseMethodFault
	ctx.Map.WithLock(ctx, p.host, func() {
		for _, change := range req.Config {
			cfg := change.GetHostPciPassthruConfig()
			found := false
			for _, base := range p.host.Config.PciPassthruInfo {
				info := base.GetHostPciPassthruInfo()
				if info.Id != cfg.Id {
					continue
				}
				found = true
				if !info.PassthruCapable {
					fault = &types.InvalidArgument{InvalidProperty: "config.id"}
					return
				}
				info.PassthruEnabled = cfg.PassthruEnabled
				// ESXi 7 (Dynamic DirectPath I/O) activates without a host reboot.
				info.PassthruActive = cfg.PassthruEnabled
			}
			if !found {
				fault = &types.InvalidArgument{InvalidProperty: "config.id"}
				return
			}
		}
		p.PciPassthruInfo = p.host.Config.PciPassthruInfo
	})
	if fault != nil {
		body.Fault_ = simulator.Fault("", fault)
		return body
	}
	body.Res = new(types.UpdatePassthruConfigResponse)
	return body
}

func (p *PciPassthruSystem) Refresh(req *types.Refresh) soap.HasFault {
	return &methods.RefreshBody{Res: new(types.RefreshResponse)}
}

func loadGpus(path string) []gpu {
	if path == "" {
		return nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		log.Fatal(err)
	}
	var doc struct {
		Devices []gpu `json:"devices"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		log.Fatalf("%s: %s", path, err)
	}
	return doc.Devices
}

func equipHost(registry *simulator.Registry, h *simulator.HostSystem, gpus []gpu) {
	// Each host has its own option list (config.option, which its OptionManager mirrors); stock
	// vcsim's list has no VMkernel.Boot.atsSupport.
	opts := append(h.Config.Option, &types.OptionValue{Key: "VMkernel.Boot.atsSupport", Value: false})
	h.Config.Option = opts
	options := registry.Get(*h.ConfigManager.AdvancedOption).(*simulator.OptionManager)
	options.Setting = opts
	// A real host also describes its options (supportedOption); clients such as community.vmware's
	// vmware_host_config_manager read the type from there and refuse an option it does not list.
	options.SupportedOption = append(append([]types.OptionDef(nil), options.SupportedOption...), types.OptionDef{
		ElementDescription: types.ElementDescription{
			Description: types.Description{Label: "ATS support", Summary: "Address Translation Services (PCIe ATS)"},
			Key:         "VMkernel.Boot.atsSupport",
		},
		OptionType: &types.BoolOption{OptionType: types.OptionType{ValueIsReadonly: types.NewBool(false)}, Supported: true},
	})

	hw := *h.Hardware
	hw.PciDevice = append([]types.HostPciDevice(nil), hw.PciDevice...)
	var infos []types.BaseHostPciPassthruInfo
	for _, g := range gpus {
		hw.PciDevice = append(hw.PciDevice, types.HostPciDevice{
			Id: g.ID, ClassId: g.ClassID, Bus: g.Bus, Slot: g.Slot, Function: g.Function,
			VendorId: g.VendorID, SubVendorId: g.SubVendorID, VendorName: g.VendorName,
			DeviceId: g.DeviceID, SubDeviceId: g.SubDeviceID, DeviceName: g.DeviceName,
		})
		infos = append(infos, &types.HostPciPassthruInfo{Id: g.ID, PassthruCapable: true})
	}
	h.Hardware = &hw
	h.Config.PciPassthruInfo = infos

	pt := &PciPassthruSystem{host: h}
	pt.PciPassthruInfo = infos
	// The reference's type is what clients see; the Go type name would be taken otherwise.
	pt.Self = types.ManagedObjectReference{Type: "HostPciPassthruSystem", Value: "pcipassthru-" + h.Self.Value}
	ref := registry.Put(pt).Reference()
	h.ConfigManager.PciPassthruSystem = &ref
}

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "address to serve on")
	hosts := flag.Int("hosts", 2, "standalone ESXi hosts")
	vms := flag.Int("vms", 2, "VMs per host")
	user := flag.String("user", "administrator@vsphere.local", "user name")
	passwordFile := flag.String("password-file", "", "file holding the password (never on the command line)")
	cert := flag.String("cert", "", "TLS certificate (PEM); empty serves plain HTTP")
	key := flag.String("key", "", "TLS key (PEM)")
	gpuFile := flag.String("gpus", "", "JSON device list: GPUs put on every host's PCI bus")
	hwVersion := flag.String("hardware-version", "vmx-17", "hardware version of the VMs")
	firmware := flag.String("firmware", "efi", "firmware of the VMs: efi or bios")
	flag.Parse()

	password := ""
	if *passwordFile != "" {
		data, err := os.ReadFile(*passwordFile)
		if err != nil {
			log.Fatal(err)
		}
		password = string(data)
		for len(password) > 0 && (password[len(password)-1] == '\n' || password[len(password)-1] == '\r') {
			password = password[:len(password)-1]
		}
	}

	esx.HardwareVersion = *hwVersion
	model := simulator.VPX()
	model.Datacenter = 1
	model.Cluster = 0
	model.ClusterHost = 0
	model.Host = *hosts
	model.Machine = *vms
	if err := model.Create(); err != nil {
		log.Fatal(err)
	}
	registry := model.Map()
	gpus := loadGpus(*gpuFile)
	for _, e := range registry.All("HostSystem") {
		equipHost(registry, e.(*simulator.HostSystem), gpus)
	}
	// VMs that take large-BAR GPUs boot with EFI (vSphere 7 creates Linux VMs that way); -firmware bios
	// makes VMs that validation must flag.
	for _, e := range registry.All("VirtualMachine") {
		e.(*simulator.VirtualMachine).Config.Firmware = *firmware
	}

	u := &url.URL{Host: *listen}
	if password != "" {
		// Only a set Listen.User makes vcsim check credentials; otherwise any password works.
		u.User = url.UserPassword(*user, password)
	}
	model.Service.Listen = u
	if *cert != "" {
		pair, err := tls.LoadX509KeyPair(*cert, *key)
		if err != nil {
			log.Fatal(err)
		}
		model.Service.TLS = &tls.Config{Certificates: []tls.Certificate{pair}}
	}
	server := model.Service.NewServer()
	shown := *server.URL
	shown.User = nil
	fmt.Printf("vcsim listening on %s\n", shown.String())
	os.Stdout.Sync()

	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)
	<-stop
	server.Close()
	model.Remove()
}
