/**
 * A JSON schema for the InferencePool example (deploy/kustomize/overlays/
 * inference-pool/inferencepool.yaml), written from the CRD of the Gateway API
 * Inference Extension: config/crd/bases/inference.networking.k8s.io_inferencepools.yaml
 * in kubernetes-sigs/gateway-api-inference-extension, group
 * inference.networking.k8s.io, version v1 (v1.0.0 to v1.6.0), and its API
 * reference (https://gateway-api-inference-extension.sigs.k8s.io/reference/spec).
 * No npm package ships typed models for it.
 *
 * Where releases differ, the schema takes the stricter rule so the example
 * applies to all of them: spec.endpointPickerRef is required (it is in v1.0.x,
 * optional since v1.6.0) and spec.targetPorts holds one port (v1.0.x allows
 * one, later releases up to 8). Unknown fields are refused, as the API server
 * does with strict field validation. The CEL rules (targetPorts unique, a port
 * for a Service endpoint picker) are written as plain schema.
 */
const dns1123Subdomain = "^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$";
const labelValue = "^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$";
const port = {
  type: "object",
  additionalProperties: false,
  required: ["number"],
  properties: { number: { type: "integer", minimum: 1, maximum: 65535 } },
};

export const INFERENCE_POOL_SCHEMA = {
  type: "object",
  additionalProperties: false,
  required: ["apiVersion", "kind", "metadata", "spec"],
  properties: {
    apiVersion: { const: "inference.networking.k8s.io/v1" },
    kind: { const: "InferencePool" },
    metadata: {
      type: "object",
      required: ["name"],
      properties: {
        name: { type: "string", pattern: dns1123Subdomain, maxLength: 253 },
        namespace: { type: "string" },
        labels: { type: "object", additionalProperties: { type: "string", pattern: labelValue, maxLength: 63 } },
        annotations: { type: "object", additionalProperties: { type: "string" } },
      },
    },
    spec: {
      type: "object",
      additionalProperties: false,
      required: ["selector", "targetPorts", "endpointPickerRef"],
      properties: {
        selector: {
          type: "object",
          additionalProperties: false,
          required: ["matchLabels"],
          properties: {
            matchLabels: {
              type: "object",
              minProperties: 1,
              maxProperties: 64,
              additionalProperties: { type: "string", pattern: labelValue, maxLength: 63 },
            },
          },
        },
        targetPorts: { type: "array", minItems: 1, maxItems: 1, items: port },
        appProtocol: { enum: ["http", "kubernetes.io/h2c"] },
        endpointPickerRef: {
          type: "object",
          additionalProperties: false,
          required: ["name"],
          properties: {
            group: { type: "string", maxLength: 253, pattern: `^$|${dns1123Subdomain}` },
            kind: { type: "string", minLength: 1, maxLength: 63, pattern: "^[a-zA-Z]([-a-zA-Z0-9]*[a-zA-Z0-9])?$" },
            name: { type: "string", minLength: 1, maxLength: 253 },
            port,
            failureMode: { enum: ["FailOpen", "FailClose"] },
          },
          // CEL in the CRD: self.kind != 'Service' || has(self.port) (kind defaults to Service)
          if: { required: ["kind"], properties: { kind: { not: { const: "Service" } } } },
          else: { required: ["port"] },
        },
      },
    },
  },
} as const;
