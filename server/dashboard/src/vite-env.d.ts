/// <reference types="vite/client" />
interface ImportMetaEnv {
  readonly VITE_LAYERCAST_API?: string;
}
