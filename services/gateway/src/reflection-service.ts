import { toBinary, type DescFile, type DescService } from "@bufbuild/protobuf";
import { nestedTypes } from "@bufbuild/protobuf/reflect";
import { FileDescriptorProtoSchema } from "@bufbuild/protobuf/wkt";
import { Code, type ConnectRouter, type ServiceImpl } from "@connectrpc/connect";
import * as v1 from "@shoal/gen/grpc/reflection/v1/reflection_pb.ts";
import * as v1alpha from "@shoal/gen/grpc/reflection/v1alpha/reflection_pb.ts";

/** What a reflection request asks (the same oneof in v1 and v1alpha). */
type Question = v1.ServerReflectionRequest["messageRequest"] | v1alpha.ServerReflectionRequest["messageRequest"];

/** What a reflection response answers, as an init shape both versions accept. */
type Answer =
  | { case: "fileDescriptorResponse"; value: { fileDescriptorProto: Uint8Array[] } }
  | { case: "allExtensionNumbersResponse"; value: { baseTypeName: string; extensionNumber: number[] } }
  | { case: "listServicesResponse"; value: { service: { name: string }[] } }
  | { case: "errorResponse"; value: { errorCode: number; errorMessage: string } };

/**
 * The descriptors a gateway serves, indexed for reflection: files by name, every fully-qualified
 * symbol (messages, enums, services, methods, fields, enum values, extensions) by name, and
 * extensions by extendee and number. Built from the file descriptors embedded in gen/*_pb.ts.
 */
export class DescriptorIndex {
  private readonly files = new Map<string, DescFile>();
  private readonly symbols = new Map<string, DescFile>();
  private readonly extensions = new Map<string, Map<number, DescFile>>();
  private readonly serialized = new Map<DescFile, Uint8Array>();

  constructor(readonly services: readonly DescService[]) {
    for (const s of services) this.addFile(s.file);
  }

  private addFile(file: DescFile): void {
    if (this.files.has(file.proto.name)) return;
    this.files.set(file.proto.name, file);
    for (const dep of file.dependencies) this.addFile(dep);
    for (const t of nestedTypes(file)) {
      this.symbols.set(t.typeName, file);
      switch (t.kind) {
        case "message":
          for (const f of t.fields) this.symbols.set(`${t.typeName}.${f.name}`, file);
          for (const o of t.oneofs) this.symbols.set(`${t.typeName}.${o.name}`, file);
          break;
        case "enum": {
          // Enum values are scoped like siblings of their enum (C++ scoping rules).
          const scope = t.typeName.slice(0, Math.max(0, t.typeName.lastIndexOf(".")));
          for (const v of t.values) this.symbols.set(scope === "" ? v.name : `${scope}.${v.name}`, file);
          break;
        }
        case "service":
          for (const m of t.methods) this.symbols.set(`${t.typeName}.${m.name}`, file);
          break;
        case "extension": {
          const byNumber = this.extensions.get(t.extendee.typeName) ?? new Map<number, DescFile>();
          byNumber.set(t.number, file);
          this.extensions.set(t.extendee.typeName, byNumber);
          break;
        }
      }
    }
  }

  /** The file and everything it imports, transitively, the requested file first. */
  private withDependencies(file: DescFile): Uint8Array[] {
    const out: DescFile[] = [];
    const visit = (f: DescFile): void => {
      if (out.includes(f)) return;
      out.push(f);
      f.dependencies.forEach(visit);
    };
    visit(file);
    return out.map((f) => {
      let bytes = this.serialized.get(f);
      if (!bytes) {
        bytes = toBinary(FileDescriptorProtoSchema, f.proto);
        this.serialized.set(f, bytes);
      }
      return bytes;
    });
  }

  private fileAnswer(file: DescFile | undefined, notFound: string): Answer {
    if (!file) return { case: "errorResponse", value: { errorCode: Code.NotFound, errorMessage: notFound } };
    return { case: "fileDescriptorResponse", value: { fileDescriptorProto: this.withDependencies(file) } };
  }

  /** Answers one reflection request; unknown names get NOT_FOUND in an ErrorResponse. */
  answer(q: Question): Answer {
    switch (q.case) {
      case "listServices":
        return { case: "listServicesResponse", value: { service: this.services.map((s) => ({ name: s.typeName })) } };
      case "fileByFilename":
        return this.fileAnswer(this.files.get(q.value), `file not found: ${q.value}`);
      case "fileContainingSymbol":
        return this.fileAnswer(this.symbols.get(q.value.replace(/^\./, "")), `symbol not found: ${q.value}`);
      case "fileContainingExtension": {
        const { containingType, extensionNumber } = q.value;
        const file = this.extensions.get(containingType)?.get(extensionNumber);
        return this.fileAnswer(file, `extension not found: ${containingType}(${extensionNumber})`);
      }
      case "allExtensionNumbersOfType": {
        const type = q.value.replace(/^\./, "");
        if (!this.symbols.has(type)) {
          return { case: "errorResponse", value: { errorCode: Code.NotFound, errorMessage: `type not found: ${q.value}` } };
        }
        return { case: "allExtensionNumbersResponse", value: { baseTypeName: type, extensionNumber: [...(this.extensions.get(type)?.keys() ?? [])] } };
      }
      default:
        return { case: "errorResponse", value: { errorCode: Code.InvalidArgument, errorMessage: "message_request: not set" } };
    }
  }
}

/** grpc.reflection.v1.ServerReflection over an index. */
export function createReflectionV1(index: DescriptorIndex): ServiceImpl<typeof v1.ServerReflection> {
  return {
    async *serverReflectionInfo(requests) {
      for await (const req of requests) yield { validHost: req.host, originalRequest: req, messageResponse: index.answer(req.messageRequest) };
    },
  };
}

/** grpc.reflection.v1alpha.ServerReflection (deprecated upstream, still asked for by older tools). */
export function createReflectionV1alpha(index: DescriptorIndex): ServiceImpl<typeof v1alpha.ServerReflection> {
  return {
    async *serverReflectionInfo(requests) {
      for await (const req of requests) yield { validHost: req.host, originalRequest: req, messageResponse: index.answer(req.messageRequest) };
    },
  };
}

/**
 * Serves gRPC server reflection (v1 and v1alpha) on `router` for `services` and for itself, so
 * `grpcurl`, `buf curl --reflect` and Postman can list and call the API without the .proto files.
 */
export function registerReflection(router: ConnectRouter, services: readonly DescService[], options: { readMaxBytes?: number } = {}): void {
  const index = new DescriptorIndex([...services, v1.ServerReflection, v1alpha.ServerReflection]);
  router.service(v1.ServerReflection, createReflectionV1(index), options);
  router.service(v1alpha.ServerReflection, createReflectionV1alpha(index), options);
}
