#!/bin/sh
# Installs the DockerIOS guest agent into a macOS golden image.
#
#   sudo ./install.sh [path/to/dockerios-agent] [path/to/agent.yaml]
#
# Defaults: ./dockerios-agent and ./agent.yaml next to this script. Run it
# inside the image (as root) while building it; the agent then starts at
# every boot. Re-running it upgrades binary, config and plist in place.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
binary=${1:-$here/dockerios-agent}
config=${2:-$here/agent.yaml}
plist=$here/io.dockerios.agent.plist
label=io.dockerios.agent

bin_dest=/usr/local/libexec/dockerios-agent
config_dest=/Library/DockerIOS/agent.yaml
plist_dest=/Library/LaunchDaemons/$label.plist
log_dir=/Library/Logs/DockerIOS

if [ "$(id -u)" -ne 0 ]; then
	echo "install.sh: must run as root" >&2
	exit 1
fi
for f in "$binary" "$config" "$plist"; do
	[ -f "$f" ] || { echo "install.sh: missing $f" >&2; exit 1; }
done

# Refuse a config the agent would reject rather than bake an image whose
# machines all report Degraded/ConfigInvalid.
"$binary" --check-config --config "$config"

# Stop a running agent before replacing its files; absent is fine.
launchctl bootout "system/$label" 2>/dev/null || true

install -d -o root -g wheel -m 0755 /usr/local/libexec /Library/DockerIOS "$log_dir"
install -o root -g wheel -m 0755 "$binary" "$bin_dest"
# The config names token sources and checks, not secrets, but only root
# should change what "ready" means.
install -o root -g wheel -m 0644 "$config" "$config_dest"
# launchd ignores daemon plists not owned by root:wheel or group/world
# writable.
install -o root -g wheel -m 0644 "$plist" "$plist_dest"

launchctl bootstrap system "$plist_dest"
launchctl enable "system/$label"
echo "installed $label; logs in $log_dir/agent.log"
