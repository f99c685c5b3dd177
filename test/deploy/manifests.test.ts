/**
 * deploy/: every kustomization rendered (test/deploy/kustomize.ts), every
 * object validated against the Kubernetes schemas and type-checked for
 * unknown fields (validate.ts), and the properties the layouts promise
 * asserted: a hardened, probed sidecar; in the pod, a native sidecar on the
 * public port calling vLLM on loopback; the tier's HPA and PDB; the
 * InferencePool on the sidecar's port; monitors and alerts on metrics the
 * service exports; settings the CLI knows; a Dockerfile that ships what
 * `serve` reads at run time.
 */
import { execFileSync, spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { parseAllDocuments } from "yaml";
import { SETTINGS } from "../../src/commands/settings.js";
import { createMetrics } from "../../src/service/metrics.js";
import { objectId, podContainers, readYamlDocuments, renderKustomization, type K8sObject } from "./kustomize.js";
import { schemaErrors, typeErrors } from "./validate.js";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const KUSTOMIZE = path.join(ROOT, "deploy/kustomize");

const IN_POD = "overlays/in-pod-sidecar";
const TIER = "overlays/sidecar-tier";
const POOL = "overlays/inference-pool";
const POD_MONITOR = "monitoring/pod-monitor";
const SERVICE_MONITOR = "monitoring/service-monitor";
const KUSTOMIZATIONS = ["base", IN_POD, TIER, POOL, "monitoring/rules", POD_MONITOR, SERVICE_MONITOR];

/** Metrics the rules may name before the service exports them, and why. */
const PENDING_METRICS: Record<string, string> = {};
/** Settings the manifests may set before settings.ts has their row, and why. */
const PENDING_ENV: Record<string, string> = {};

const rendered = new Map(KUSTOMIZATIONS.map((k) => [k, renderKustomization(path.join(KUSTOMIZE, k))]));
const examples = readdirSync(path.join(KUSTOMIZE, "examples"))
  .filter((f) => f.endsWith(".yaml"))
  .flatMap((f) => readYamlDocuments(path.join(KUSTOMIZE, "examples", f)).map((d) => ({ file: f, object: d as K8sObject })));

function objects(k: string): K8sObject[] {
  return rendered.get(k)!;
}
function find(k: string, kind: string, name: string): K8sObject {
  const o = objects(k).find((x) => x.kind === kind && x.metadata.name === name);
  if (!o) throw new Error(`${k}: no ${kind}/${name}`);
  return o;
}

type Probe = { httpGet?: { path: string; port: string | number }; grpc?: { port: number; service?: string }; exec?: unknown };
type Container = {
  name: string;
  image?: string;
  args?: string[];
  env?: { name: string; value?: string; valueFrom?: { secretKeyRef?: { name: string; key: string; optional?: boolean } } }[];
  ports?: { name?: string; containerPort: number }[];
  restartPolicy?: string;
  startupProbe?: Probe;
  livenessProbe?: Probe;
  readinessProbe?: Probe;
  resources?: { requests?: Record<string, string>; limits?: Record<string, string> };
  securityContext?: Record<string, unknown>;
  volumeMounts?: { name: string; mountPath: string }[];
};
type PodSpec = {
  containers: Container[];
  initContainers?: Container[];
  volumes?: { name: string; emptyDir?: unknown }[];
  securityContext?: Record<string, unknown>;
};

function podTemplate(d: K8sObject): { labels: Record<string, string>; spec: PodSpec } {
  const t = (d.spec as { template: { metadata: { labels: Record<string, string> }; spec: PodSpec } }).template;
  return { labels: t.metadata.labels, spec: t.spec };
}

/** `--flag value` pairs of a container's args. */
function flags(c: Container): Map<string, string> {
  const args = c.args ?? [];
  const m = new Map<string, string>();
  for (let i = 0; i < args.length; i++) {
    const a = args[i]!;
    expect(a.startsWith("--"), `${c.name}: argument ${a} is not a --flag`).toBe(true);
    const eq = a.indexOf("=");
    if (eq > 0) m.set(a.slice(0, eq), a.slice(eq + 1));
    else m.set(a, args[++i]!);
  }
  return m;
}

function portNumber(c: Container, port: string | number): number {
  if (typeof port === "number") return port;
  const p = c.ports?.find((x) => x.name === port);
  expect(p, `${c.name}: no container port named ${port}`).toBeDefined();
  return p!.containerPort;
}

function matches(selector: Record<string, string>, labels: Record<string, string> | undefined): boolean {
  return Object.entries(selector).every(([k, v]) => labels?.[k] === v);
}

/** What every harmony-sidecar container must have, in any layout. */
function expectHardenedSidecar(c: Container, pod: PodSpec): void {
  const sc = c.securityContext ?? {};
  expect(sc.runAsNonRoot).toBe(true);
  expect(typeof sc.runAsUser === "number" && sc.runAsUser > 0).toBe(true);
  expect(sc.readOnlyRootFilesystem).toBe(true);
  expect(sc.allowPrivilegeEscalation).toBe(false);
  expect(sc.capabilities).toEqual({ drop: ["ALL"] });
  expect(sc.seccompProfile).toEqual({ type: "RuntimeDefault" });
  // the one writable place: /tmp, an emptyDir
  const tmp = c.volumeMounts?.find((m) => m.mountPath === "/tmp");
  expect(tmp).toBeDefined();
  expect(pod.volumes?.find((v) => v.name === tmp!.name)?.emptyDir).toBeDefined();

  for (const kind of ["requests", "limits"] as const)
    for (const r of ["cpu", "memory"]) expect(c.resources?.[kind]?.[r], `resources.${kind}.${r}`).toBeDefined();

  // ports and probes: HTTP /healthz and /readyz on the HTTP port, gRPC health on the gRPC port
  const f = flags(c);
  const httpPort = Number(f.get("--port"));
  const grpcPort = Number(f.get("--grpc-port"));
  expect(portNumber(c, "harmony-http")).toBe(httpPort);
  expect(portNumber(c, "harmony-grpc")).toBe(grpcPort);
  expect(c.livenessProbe?.httpGet?.path).toBe("/healthz");
  expect(portNumber(c, c.livenessProbe!.httpGet!.port)).toBe(httpPort);
  expect(c.readinessProbe?.httpGet?.path).toBe("/readyz");
  expect(portNumber(c, c.readinessProbe!.httpGet!.port)).toBe(httpPort);
  expect(c.startupProbe?.grpc?.port).toBe(grpcPort);
  // every pod listens: the image's HARMONY_HOST is 0.0.0.0, and so is the manifest's
  expect(c.env?.find((e) => e.name === "HARMONY_HOST")?.value).toBe("0.0.0.0");
  // the reasoning store's URL comes from a Secret, and the pod starts without one
  const store = c.env?.find((e) => e.name === "HARMONY_COT_STORE")?.valueFrom?.secretKeyRef;
  expect(store).toEqual({ name: "harmony-cot-store", key: "url", optional: true });
  expect(c.image).toBe("harmony-sidecar:0.1.0");
}

function inPodSidecar(k: string): { pod: PodSpec; labels: Record<string, string>; sidecar: Container; vllm: Container } {
  const { spec, labels } = podTemplate(find(k, "Deployment", "vllm"));
  const sidecar = spec.initContainers?.find((c) => c.name === "harmony-sidecar");
  const vllm = spec.containers.find((c) => c.name === "vllm");
  expect(sidecar).toBeDefined();
  expect(vllm).toBeDefined();
  return { pod: spec, labels, sidecar: sidecar!, vllm: vllm! };
}

describe("deploy/kustomize", () => {
  it("renders every kustomization under deploy/kustomize (a new one must be added here)", () => {
    const found: string[] = [];
    const walk = (dir: string) => {
      for (const e of readdirSync(dir)) {
        const p = path.join(dir, e);
        if (statSync(p).isDirectory()) walk(p);
        else if (e === "kustomization.yaml") found.push(path.relative(KUSTOMIZE, dir));
      }
    };
    walk(KUSTOMIZE);
    expect(found.sort()).toEqual([...KUSTOMIZATIONS].sort());
  });

  it.each(KUSTOMIZATIONS)("%s: every object validates against its schema", (k) => {
    const objs = objects(k);
    expect(objs.length).toBeGreaterThan(0);
    const errors = objs.map((o) => [objectId(o), schemaErrors(o)]).filter(([, e]) => e !== "");
    expect(errors).toEqual([]);
  });

  it("examples/: the Secrets validate, and name what the sidecars read", () => {
    expect(examples.map((e) => e.object.metadata.name).sort()).toEqual(["harmony-cot-store", "harmony-token"]);
    for (const { file, object } of examples) expect([file, schemaErrors(object)]).toEqual([file, ""]);
  });

  it("every field of every object is known to the Kubernetes types (no typo passes)", () => {
    const all = [...rendered].flatMap(([k, objs]) => objs.map((o) => ({ label: `${k} ${objectId(o)}`, object: o })));
    all.push(...examples.map((e) => ({ label: `examples/${e.file}`, object: e.object })));
    expect(typeErrors(all)).toEqual([]);
  });

  it("the field check does catch an unknown field", () => {
    const d = structuredClone(find(IN_POD, "Deployment", "vllm"));
    const sidecar = (podTemplate(d).spec.initContainers ?? [])[0] as Container & { readinesProbe?: unknown };
    sidecar.readinesProbe = sidecar.readinessProbe;
    const errors = typeErrors([{ label: "typo", object: d }]);
    expect(errors.length).toBe(1);
    expect(errors[0]).toMatch(/readinesProbe/);
  });

  describe("in-pod-sidecar", () => {
    it("adds harmony-sidecar to the vLLM pod as a native sidecar, calling vLLM on loopback", () => {
      const { sidecar, vllm, labels } = inPodSidecar(IN_POD);
      expect(sidecar.restartPolicy).toBe("Always");
      const upstream = new URL(flags(sidecar).get("--upstream")!);
      expect(upstream.hostname).toBe("127.0.0.1");
      expect(upstream.port).toBe("8000");
      // vLLM listens on loopback only, on the port the sidecar calls
      const vargs = vllm.args ?? [];
      expect(vargs[vargs.indexOf("--host") + 1]).toBe("127.0.0.1");
      expect(vargs[vargs.indexOf("--port") + 1]).toBe(upstream.port);
      expect(vllm.image).toMatch(/^vllm\/vllm-openai:/);
      expect(labels["app.kubernetes.io/part-of"]).toBe("harmony-sidecar");
    });

    it("hardens and probes the sidecar", () => {
      const { sidecar, pod } = inPodSidecar(IN_POD);
      expectHardenedSidecar(sidecar, pod);
      expect(flags(sidecar).get("--port")).toBe("8080");
    });

    it("keeps the pod's own containers and volumes (the patch merges, it does not replace)", () => {
      const base = podTemplate(find("base", "Deployment", "vllm")).spec;
      const { pod } = inPodSidecar(IN_POD);
      expect(pod.containers.map((c) => c.name)).toEqual(base.containers.map((c) => c.name));
      expect(pod.containers[0]!.resources).toEqual(base.containers[0]!.resources);
      expect(pod.volumes?.map((v) => v.name).sort()).toEqual([...(base.volumes ?? []).map((v) => v.name), "harmony-tmp"].sort());
    });

    it("exposes the sidecar's public port through a Service", () => {
      const svc = find(IN_POD, "Service", "harmony-sidecar");
      const spec = svc.spec as { selector: Record<string, string>; ports: { name: string; port: number; targetPort: string }[] };
      const { labels } = inPodSidecar(IN_POD);
      expect(matches(spec.selector, labels)).toBe(true);
      expect(spec.ports.find((p) => p.port === 8080)?.targetPort).toBe("harmony-http");
      expect(spec.ports.find((p) => p.port === 8766)?.targetPort).toBe("harmony-grpc");
    });
  });

  describe("sidecar-tier", () => {
    it("runs two hardened sidecars calling vLLM's Service", () => {
      const d = find(TIER, "Deployment", "harmony-sidecar");
      expect((d.spec as { replicas: number }).replicas).toBe(2);
      const { spec, labels } = podTemplate(d);
      const c = spec.containers.find((x) => x.name === "harmony-sidecar")!;
      expectHardenedSidecar(c, spec);
      expect(spec.securityContext?.runAsNonRoot).toBe(true);
      const upstream = new URL(flags(c).get("--upstream")!);
      const vllmSvc = find(TIER, "Service", upstream.hostname);
      const ports = (vllmSvc.spec as { ports: { port: number }[] }).ports;
      expect(ports.map((p) => p.port)).toContain(Number(upstream.port));
      // and that Service reaches vLLM, which listens on every interface here
      const vllm = podTemplate(find(TIER, "Deployment", "vllm"));
      expect(matches((vllmSvc.spec as { selector: Record<string, string> }).selector, vllm.labels)).toBe(true);
      expect(vllm.spec.containers[0]!.args).not.toContain("127.0.0.1");
      expect(matches((find(TIER, "Service", "harmony-sidecar").spec as { selector: Record<string, string> }).selector, labels)).toBe(true);
    });

    it("has an autoscaler on CPU and a disruption budget for those pods", () => {
      const hpa = find(TIER, "HorizontalPodAutoscaler", "harmony-sidecar");
      expect(hpa.apiVersion).toBe("autoscaling/v2");
      const h = hpa.spec as {
        scaleTargetRef: { kind: string; name: string };
        minReplicas: number;
        maxReplicas: number;
        metrics: { type: string; resource?: { name: string } }[];
      };
      expect(h.scaleTargetRef).toMatchObject({ kind: "Deployment", name: "harmony-sidecar" });
      expect(h.minReplicas).toBeGreaterThanOrEqual(2);
      expect(h.maxReplicas).toBeGreaterThan(h.minReplicas);
      expect(h.metrics.some((m) => m.type === "Resource" && m.resource?.name === "cpu")).toBe(true);
      const pdb = find(TIER, "PodDisruptionBudget", "harmony-sidecar");
      const { labels } = podTemplate(find(TIER, "Deployment", "harmony-sidecar"));
      expect(matches((pdb.spec as { selector: { matchLabels: Record<string, string> } }).selector.matchLabels, labels)).toBe(true);
      expect((pdb.spec as { minAvailable: number }).minAvailable).toBeLessThan(h.minReplicas);
    });
  });

  describe("inference-pool", () => {
    it("pools the in-pod sidecar pods on the sidecar's port", () => {
      const pool = find(POOL, "InferencePool", "harmony-pool");
      const spec = pool.spec as { selector: { matchLabels: Record<string, string> }; targetPorts: { number: number }[] };
      const { labels, sidecar, pod } = inPodSidecar(POOL);
      expect(matches(spec.selector.matchLabels, labels)).toBe(true);
      expect(spec.targetPorts.map((p) => p.number)).toEqual([portNumber(sidecar, "harmony-http")]);
      expect(sidecar.restartPolicy).toBe("Always");
      expect(new URL(flags(sidecar).get("--upstream")!).hostname).toBe("127.0.0.1");
      expectHardenedSidecar(sidecar, pod);
    });

    it("lets only the endpoint picker reach vLLM's own port", () => {
      const np = find(POOL, "NetworkPolicy", "vllm-behind-harmony-sidecar");
      const spec = np.spec as {
        podSelector: { matchLabels: Record<string, string> };
        ingress: { from?: unknown[]; ports: { port: number }[] }[];
      };
      expect(matches(spec.podSelector.matchLabels, inPodSidecar(POOL).labels)).toBe(true);
      const open = spec.ingress.filter((r) => !r.from).flatMap((r) => r.ports.map((p) => p.port));
      expect(open.sort()).toEqual([8080, 8766]);
      const vllmRule = spec.ingress.find((r) => r.ports.some((p) => p.port === 8000));
      expect(vllmRule?.from?.length).toBeGreaterThan(0);
    });
  });

  describe("monitoring", () => {
    const sidecarPods = [IN_POD, TIER, POOL].map((k) => {
      const d = objects(k).find((o) => o.kind === "Deployment" && podContainers(o).some((c) => c.name === "harmony-sidecar"))!;
      const { labels, spec } = podTemplate(d);
      const c = [...(spec.initContainers ?? []), ...spec.containers].find((x) => x.name === "harmony-sidecar")!;
      return { k, labels, c };
    });

    it("the PodMonitor scrapes /metrics on the sidecar's port in every layout", () => {
      const pm = find(POD_MONITOR, "PodMonitor", "harmony-sidecar");
      const spec = pm.spec as { selector: { matchLabels: Record<string, string> }; podMetricsEndpoints: { port: string; path: string }[] };
      expect(spec.podMetricsEndpoints.map((e) => e.path)).toEqual(["/metrics"]);
      for (const { k, labels, c } of sidecarPods) {
        expect(matches(spec.selector.matchLabels, labels), k).toBe(true);
        for (const e of spec.podMetricsEndpoints) expect(c.ports?.some((p) => p.name === e.port)).toBe(true);
      }
    });

    it("the ServiceMonitor scrapes /metrics through the sidecar Service of every layout", () => {
      const sm = find(SERVICE_MONITOR, "ServiceMonitor", "harmony-sidecar");
      const spec = sm.spec as { selector: { matchLabels: Record<string, string> }; endpoints: { port: string; path: string }[] };
      expect(spec.endpoints.map((e) => e.path)).toEqual(["/metrics"]);
      for (const k of [IN_POD, TIER, POOL]) {
        const services = objects(k).filter((o) => o.kind === "Service" && matches(spec.selector.matchLabels, o.metadata.labels));
        expect(
          services.map((s) => s.metadata.name),
          k,
        ).toEqual(["harmony-sidecar"]);
        const ports = (services[0]!.spec as { ports: { name: string }[] }).ports;
        for (const e of spec.endpoints) expect(ports.some((p) => p.name === e.port)).toBe(true);
      }
    });

    it("/metrics is scraped without the bearer token when one is set", () => {
      for (const { c } of sidecarPods) {
        expect(c.env?.find((e) => e.name === "HARMONY_PUBLIC_METRICS")?.value).toBe("true");
        expect(c.env?.find((e) => e.name === "HARMONY_TOKEN")?.valueFrom?.secretKeyRef?.optional).toBe(true);
      }
    });

    it("the alerts cover recoveries, errors and store failures, on metrics the service exports", () => {
      const rule = find("monitoring/rules", "PrometheusRule", "harmony-sidecar");
      const rules = (rule.spec as { groups: { rules: { alert: string; expr: string }[] }[] }).groups.flatMap((g) => g.rules);
      const exported = new Set(
        createMetrics()
          .registry.getMetricsAsArray()
          .map((m) => m.name),
      );
      const named = new Set(rules.flatMap((r) => r.expr.match(/\bharmony_[a-z0-9_]+/g) ?? []));
      for (const m of ["harmony_recoveries_total", "harmony_errors_total", "harmony_cot_store_failures_total"]) expect(named).toContain(m);
      for (const m of named) expect(exported.has(m) || m in PENDING_METRICS, `${m} is not exported by src/service/metrics.ts`).toBe(true);
    });
  });

  it("sets only flags and HARMONY_* variables that `serve` has", () => {
    const known = new Set<string>(SETTINGS.map((s) => s.env));
    const knownFlags = new Set<string>(SETTINGS.map((s) => s.flag.split(" ")[0]!));
    for (const k of [IN_POD, TIER, POOL])
      for (const o of objects(k))
        for (const c of podContainers(o) as Container[]) {
          if (c.name !== "harmony-sidecar") continue;
          for (const e of c.env ?? [])
            if (e.name.startsWith("HARMONY_")) expect(known.has(e.name) || e.name in PENDING_ENV, `${k}: ${e.name}`).toBe(true);
          for (const f of flags(c).keys()) expect(knownFlags.has(f), `${k}: ${f}`).toBe(true);
        }
  });

  it("the renderer merges lists as Kustomize does (order and keys as kubectl kustomize v5.5.0 gave them)", () => {
    const dir = mkdtempSync(path.join(tmpdir(), "kustomize-"));
    try {
      const deployment = (spec: unknown) => ({
        apiVersion: "apps/v1",
        kind: "Deployment",
        metadata: { name: "x" },
        spec: { template: { spec } },
      });
      const base = {
        containers: [
          { name: "a", image: "a" },
          {
            name: "b",
            image: "b",
            env: [
              { name: "E1", value: "1" },
              { name: "E2", value: "2" },
            ],
          },
        ],
        volumes: [
          { name: "v1", emptyDir: {} },
          { name: "v2", emptyDir: {} },
        ],
      };
      const patch = {
        containers: [
          { name: "c", image: "c" },
          {
            name: "b",
            image: "b2",
            env: [
              { name: "E3", value: "3" },
              { name: "E1", value: "x" },
            ],
          },
          { name: "d", image: "d" },
        ],
        volumes: [
          { name: "v3", emptyDir: {} },
          { name: "v1", emptyDir: { medium: "Memory" } },
          { name: "v4", emptyDir: {} },
        ],
      };
      writeFileSync(path.join(dir, "d.yaml"), JSON.stringify(deployment(base)));
      writeFileSync(path.join(dir, "p.yaml"), JSON.stringify(deployment(patch)));
      writeFileSync(
        path.join(dir, "kustomization.yaml"),
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: [d.yaml]\npatches: [{path: p.yaml}]\n",
      );
      const [out] = renderKustomization(dir);
      expect(out).toEqual(
        deployment({
          containers: [
            { name: "c", image: "c" },
            {
              name: "b",
              image: "b2",
              env: [
                { name: "E3", value: "3" },
                { name: "E1", value: "x" },
                { name: "E2", value: "2" },
              ],
            },
            { name: "d", image: "d" },
            { name: "a", image: "a" },
          ],
          volumes: [
            { name: "v3", emptyDir: {} },
            { name: "v1", emptyDir: { medium: "Memory" } },
            { name: "v4", emptyDir: {} },
            { name: "v2", emptyDir: {} },
          ],
        }),
      );
      // and what it does not know, it refuses
      writeFileSync(path.join(dir, "p.yaml"), JSON.stringify(deployment({ tolerations: [{ key: "k", operator: "Exists" }] })));
      expect(() => renderKustomization(dir)).toThrow(/does not know how Kustomize merges the list PodSpec.tolerations/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  // kubectl (with its built-in Kustomize) is on this project's machines, not
  // everywhere; the renderer above works without it, and this proves it
  // renders as Kustomize does where kubectl is there to ask.
  const kubectl = spawnSync("kubectl", ["version", "--client"], { stdio: "ignore" }).status === 0;
  it.skipIf(!kubectl)("renders every kustomization as `kubectl kustomize` does (skipped where kubectl is not installed)", () => {
    for (const k of KUSTOMIZATIONS) {
      const out = execFileSync("kubectl", ["kustomize", path.join(KUSTOMIZE, k)], { encoding: "utf8" });
      const theirs = parseAllDocuments(out).map((d) => d.toJS() as K8sObject);
      const byId = (xs: K8sObject[]) => new Map(xs.map((o) => [objectId(o), o]));
      expect(byId(objects(k)), k).toEqual(byId(theirs));
    }
  });
});

describe("deploy/Dockerfile", () => {
  const dockerfile = readFileSync(path.join(ROOT, "deploy/Dockerfile"), "utf8");
  const runtime = dockerfile.slice(dockerfile.lastIndexOf("\nFROM "));

  it("ships production dependencies, the compiled service and the proto files it reads at start-up", () => {
    expect(runtime).toMatch(/^RUN npm ci --omit=dev/m);
    expect(runtime).toMatch(/^COPY --from=build \/app\/dist\/src \.\/dist\/src$/m);
    expect(runtime).toMatch(/^COPY proto \.\/proto$/m);
    // what src/protocol/schema.ts loads
    const schema = readFileSync(path.join(ROOT, "src/protocol/schema.ts"), "utf8");
    const loaded = [...schema.matchAll(/"(\w+(?:\/\w+)+\.proto)"/g)].map((m) => m[1]!);
    expect(loaded.length).toBeGreaterThan(0);
    for (const p of loaded) expect(existsSync(path.join(ROOT, "proto", p)), p).toBe(true);
  });

  it("runs `serve` as a numeric non-root user, listening on every interface", () => {
    expect(runtime).toMatch(/^USER [1-9]\d*:[1-9]\d*$/m);
    expect(runtime).toMatch(/HARMONY_HOST=0\.0\.0\.0/);
    expect(runtime).toMatch(/^ENTRYPOINT \["node", "dist\/src\/cli\.js", "serve"\]$/m);
    // the numeric user is the manifests' runAsUser
    const uid = Number(/^USER (\d+)/m.exec(runtime)![1]);
    const { sidecar } = inPodSidecar(IN_POD);
    expect(sidecar.securityContext?.runAsUser).toBe(uid);
  });

  it(".dockerignore keeps what the build reads in the context", () => {
    const ignored = readFileSync(path.join(ROOT, ".dockerignore"), "utf8")
      .split("\n")
      .map((l) => l.trim())
      .filter((l) => l !== "" && !l.startsWith("#"));
    for (const needed of ["package.json", "package-lock.json", "tsconfig.json", "scripts", "src", "proto"])
      expect(ignored).not.toContain(needed);
    for (const heavy of ["node_modules", "dist", ".git"]) expect(ignored).toContain(heavy);
    for (const copied of [...dockerfile.matchAll(/^COPY (?!--from)(.+) \S+$/gm)].flatMap((m) => m[1]!.split(" ")))
      expect(existsSync(path.join(ROOT, copied)), copied).toBe(true);
  });
});
