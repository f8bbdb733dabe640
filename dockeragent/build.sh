#!/usr/bin/env bash
# Build the CUDA agent images of matrix.txt locally (or in CI), tagged
# {arch}-ubuntu{X}-cuda{Y}[-{flavor}]. See docs/dockeragent.md.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
matrix_file=$here/matrix.txt
agent_env=$here/agent.env

usage() {
    cat <<'EOF'
Usage:
  build.sh [build] [--repo NAME] [--arch amd64|arm64] [--only TEXT]... [--tag TAG]...
                  [--with-docker-cli] [--push] [--dry-run]
      Build every image of matrix.txt as NAME:TAG (default NAME: gpuci-agent),
      or only those whose tag contains one of the --only texts (e.g. cuda12.8)
      or equals one of the --tag values. --with-docker-cli adds the Docker CLI
      (for container jobs) and appends "-docker" to every tag.
  build.sh tags [--arch ARCH]
      Print the tags the matrix builds, one per line.
  build.sh matrix-json [--arch ARCH]
      Print the matrix as an Azure Pipelines job matrix (JSON).
  build.sh pin-agent VERSION [--org URL --token-file FILE]
      Download agent VERSION for linux-x64 and linux-arm64, compute their
      SHA-256 and write them with VERSION to agent.env. With --org, the
      organisation's own package list must name the same checksums.
EOF
}

fail() {
    printf 'build.sh: %s\n' "$*" >&2
    exit 1
}

# Rows of matrix.txt as "cuda ubuntu flavor arch..." (comments and blanks dropped).
rows() {
    local line
    while IFS= read -r line || [[ -n $line ]]; do
        line=${line%%#*}
        [[ -n ${line//[[:space:]]/} ]] && printf '%s\n' "$line"
    done <"$matrix_file"
}

# tag_of CUDA UBUNTU FLAVOR ARCH
tag_of() {
    local major_minor suffix=""
    major_minor=$(cut -d. -f1-2 <<<"$1")
    [[ $3 == runtime ]] || suffix="-$3"
    printf '%s-ubuntu%s-cuda%s%s\n' "$4" "$2" "$major_minor" "$suffix"
}

# for_each_image ARCH CALLBACK: CALLBACK cuda ubuntu flavor tag, for every row
# built for ARCH (rows without architectures are built for amd64, and for any
# other --arch the operator asks for explicitly).
for_each_image() {
    local want=$1 callback=$2 cuda ubuntu flavor archs
    while read -r cuda ubuntu flavor archs; do
        [[ -n $flavor ]] || fail "matrix.txt: incomplete row '$cuda $ubuntu'"
        if [[ -n $archs && " $archs " != *" $want "* ]]; then
            continue
        fi
        "$callback" "$cuda" "$ubuntu" "$flavor" "$(tag_of "$cuda" "$ubuntu" "$flavor" "$want")"
    done < <(rows)
}

load_agent_env() {
    [[ -f $agent_env ]] || fail "agent.env is missing"
    AGENT_VERSION=$(sed -n 's/^AGENT_VERSION=//p' "$agent_env")
    AGENT_SHA256_LINUX_X64=$(sed -n 's/^AGENT_SHA256_LINUX_X64=//p' "$agent_env")
    AGENT_SHA256_LINUX_ARM64=$(sed -n 's/^AGENT_SHA256_LINUX_ARM64=//p' "$agent_env")
}

# ----------------------------------------------------------------- pin-agent
pin_agent() {
    local version=${1:-} org="" token_file="" platform file sha
    [[ $version =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || fail "pin-agent needs a version like 4.275.0"
    shift
    while (($#)); do
        case $1 in
            --org) org=${2%/}; shift 2 ;;
            --token-file) token_file=$2; shift 2 ;;
            *) fail "unknown option $1 (see --help)" ;;
        esac
    done
    [[ -z $org || -r $token_file ]] || fail "--org needs --token-file with a PAT (Agent Pools read)"
    local tmp
    tmp=$(mktemp -d)
    # shellcheck disable=SC2064 # expand $tmp now
    trap "rm -rf '$tmp'" EXIT
    declare -A sums
    for platform in linux-x64 linux-arm64; do
        file=vsts-agent-$platform-$version.tar.gz
        echo "downloading $file"
        curl -fsSL --retry 3 -o "$tmp/$file" "https://download.agent.dev.azure.com/agent/$version/$file"
        sha=$(sha256sum "$tmp/$file" | cut -d' ' -f1)
        if [[ -n $org ]]; then
            local listed token
            token=$(tr -d ' \t\r\n' <"$token_file")
            # The PAT goes to curl on stdin, never on its command line.
            listed=$(printf 'user = ":%s"\n' "$token" |
                curl -fsS --config - -H 'X-TFS-FedAuthRedirect: Suppress' \
                    "$org/_apis/distributedtask/packages/agent?platform=$platform" |
                jq -r --arg v "$version" '.value[] | select("\(.version.major).\(.version.minor).\(.version.patch)" == $v) | .hashValue' |
                head -n1)
            unset token
            [[ -n $listed ]] || fail "$org does not list agent $version for $platform"
            [[ ${listed,,} == "$sha" ]] || fail "checksum of $file ($sha) differs from the one $org lists ($listed)"
            echo "  $sha (matches $org)"
        else
            echo "  $sha (not cross-checked: add --org and --token-file to compare with your organisation)"
        fi
        sums[$platform]=$sha
    done
    cat >"$agent_env" <<EOF
# The Azure Pipelines agent baked into every image (read by build.sh and
# azure-pipelines.yml; passed to the Dockerfile as build arguments).
# Written by: build.sh pin-agent $version${org:+ --org $org}
AGENT_VERSION=$version
AGENT_SHA256_LINUX_X64=${sums[linux-x64]}
AGENT_SHA256_LINUX_ARM64=${sums[linux-arm64]}
EOF
    echo "agent.env now pins agent $version; commit it."
}

# ----------------------------------------------------------------- build
repo=gpuci-agent
arch=amd64
push=0
dry_run=0
docker_cli=false
only=()
exact=()

matches_only() {
    local text
    ((${#only[@]} + ${#exact[@]})) || return 0
    for text in "${only[@]}"; do
        [[ $1 == *"$text"* ]] && return 0
    done
    for text in "${exact[@]}"; do
        [[ $1 == "$text" ]] && return 0
    done
    return 1
}

run() {
    printf '+ %s\n' "$*"
    ((dry_run)) || "$@"
}

build_one() {
    local cuda=$1 ubuntu=$2 flavor=$3 tag=$4
    matches_only "$tag" || return 0
    [[ $docker_cli == false ]] || tag+=-docker
    local image=$repo:$tag
    local -a cmd=(docker build)
    if [[ $arch != "$(host_arch)" ]]; then
        # Another architecture needs buildx (and QEMU binfmt on this host).
        cmd=(docker buildx build --load)
    fi
    run env DOCKER_BUILDKIT=1 "${cmd[@]}" --platform "linux/$arch" \
        --build-arg "CUDA_VERSION=$cuda" --build-arg "UBUNTU_VERSION=$ubuntu" \
        --build-arg "FLAVOR=$flavor" --build-arg "AGENT_VERSION=$AGENT_VERSION" \
        --build-arg "WITH_DOCKER_CLI=$docker_cli" \
        --build-arg "AGENT_SHA256_LINUX_X64=$AGENT_SHA256_LINUX_X64" \
        --build-arg "AGENT_SHA256_LINUX_ARM64=$AGENT_SHA256_LINUX_ARM64" \
        --label "io.gpuci.cuda=$cuda" -t "$image" "$here"
    ((push == 0)) || run docker push "$image"
    built+=("$image")
}

host_arch() {
    case $(uname -m) in
        x86_64) echo amd64 ;;
        aarch64 | arm64) echo arm64 ;;
        *) uname -m ;;
    esac
}

print_tag() { printf '%s\n' "$4"; }

json_entries=()
json_entry() {
    json_entries+=("$(printf '"%s":{"CUDA_VERSION":"%s","UBUNTU_VERSION":"%s","FLAVOR":"%s","TAG":"%s"}' \
        "${4//[^A-Za-z0-9]/_}" "$1" "$2" "$3" "$4")")
}

command=build
case ${1:-} in
    build | tags | matrix-json) command=$1; shift ;;
    pin-agent) shift; pin_agent "$@"; exit 0 ;;
    -h | --help) usage; exit 0 ;;
esac
while (($#)); do
    case $1 in
        --repo) repo=${2:?--repo needs a name}; shift 2 ;;
        --arch) arch=${2:?--arch needs amd64 or arm64}; shift 2 ;;
        --only) only+=("${2:?--only needs a text}"); shift 2 ;;
        --tag) exact+=("${2:?--tag needs a tag}"); shift 2 ;;
        --push) push=1; shift ;;
        --with-docker-cli) docker_cli=true; shift ;;
        --dry-run) dry_run=1; shift ;;
        -h | --help) usage; exit 0 ;;
        *) fail "unknown argument '$1' (see --help)" ;;
    esac
done
[[ $arch == amd64 || $arch == arm64 ]] || fail "--arch must be amd64 or arm64"

case $command in
    tags) for_each_image "$arch" print_tag ;;
    matrix-json)
        for_each_image "$arch" json_entry
        (IFS=,; printf '{%s}\n' "${json_entries[*]}")
        ;;
    build)
        load_agent_env
        sha_var=AGENT_SHA256_LINUX_X64
        [[ $arch == arm64 ]] && sha_var=AGENT_SHA256_LINUX_ARM64
        if [[ -z $AGENT_VERSION || -z ${!sha_var} ]] && ((dry_run == 0)); then
            fail "agent.env has no checksum for agent '$AGENT_VERSION' on $arch: run 'build.sh pin-agent ${AGENT_VERSION:-VERSION}' first"
        fi
        built=()
        for_each_image "$arch" build_one
        ((${#built[@]})) || fail "no image of matrix.txt matches ${only[*]} ${exact[*]}"
        printf 'built: %s\n' "${built[@]}"
        ;;
esac
